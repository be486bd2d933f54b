"""What the server hears at a task's end: transcript rest, usage, one terminal call, the outbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import Message, MessageType, RunStatus
from daemon.errors import PermanentServerError, TransientServerError
from daemon.ops.metrics import Metrics
from daemon.protocol.reports import TerminalReport, UsageEntry
from daemon.shutdown import ShutdownBudget
from daemon.state.outbox import Leftover, Outbox
from daemon.task.outcome import Outcome
from daemon.testing import FakeTaskServer, reporter, settings_in

pytestmark = pytest.mark.anyio

TASK = "task-reporter-0000-0000-000000000000"
USAGE = (UsageEntry(provider="anthropic", model="m", input_tokens=3, output_tokens=5),)


def completed(output: str = "done") -> Outcome:
    return Outcome(RunStatus.COMPLETED, TerminalReport(kind="complete", output=output), USAGE)


def kept(home: Path) -> list[Leftover]:
    """What waits in the outbox of the daemon whose state is under `home`."""
    return Outbox(settings_in(home).state_dir / "outbox", Metrics()).reports()


async def test_the_transcript_rest_usage_and_report_go_in_that_order(tmp_path: Path) -> None:
    """Unsent transcript first, then usage, then the one terminal call."""
    server = FakeTaskServer()
    r = reporter(TASK, server, settings_in(tmp_path))
    r.transcript.add(Message(MessageType.TEXT, content="last words"))
    await r.report(completed())
    assert [c.method for c in server.calls] == ["send_messages", "report_usage", "send_report"]
    assert server.messages(TASK)[0]["content"] == "last words"
    assert server.usage[TASK] == list(USAGE)
    assert [rep.output for rep in server.reports[TASK]] == ["done"]
    assert kept(tmp_path) == []


async def test_a_transient_failure_keeps_the_complete_in_the_outbox(tmp_path: Path) -> None:
    """A `complete` the server cannot take now waits on disk as a `complete`, never a fail."""
    server = FakeTaskServer()
    server.fail("send_report", TransientServerError("complete", "connection refused"))
    await reporter(TASK, server, settings_in(tmp_path)).report(completed("the answer"))
    [left] = kept(tmp_path)
    assert left.report is not None
    assert (left.report.kind, left.report.output) == ("complete", "the answer")
    assert left.usage == ()  # usage was delivered; only the report waits


async def test_undelivered_transcript_waits_with_the_report(tmp_path: Path) -> None:
    """Messages the server did not take are kept with their seq for a later send."""
    server = FakeTaskServer()
    server.fail("send_messages", TransientServerError("messages", "connection refused"))
    r = reporter(TASK, server, settings_in(tmp_path))
    r.transcript.add(Message(MessageType.TEXT, content="a"))
    r.transcript.add(Message(MessageType.TEXT, content="b"))
    await r.report(completed())
    [left] = kept(tmp_path)
    assert [m["seq"] for m in left.messages] == [1, 2]
    assert left.report is None  # the report itself went through
    assert server.reports[TASK][0].kind == "complete"


async def test_a_refused_report_is_not_kept(tmp_path: Path) -> None:
    """A report the server refuses for good is logged, not stored to be refused again."""
    server = FakeTaskServer()
    server.fail("send_report", PermanentServerError("complete", "no such task state", 409))
    await reporter(TASK, server, settings_in(tmp_path)).report(completed())
    assert kept(tmp_path) == []
    assert server.count("send_report") == 1


async def test_a_task_the_server_settled_gets_no_terminal_call(tmp_path: Path) -> None:
    """An outcome without a report (cancelled on the server) sends the transcript only."""
    server = FakeTaskServer()
    r = reporter(TASK, server, settings_in(tmp_path))
    r.transcript.add(Message(MessageType.TEXT, content="until cancelled"))
    await r.report(Outcome(RunStatus.CANCELLED, None))
    assert server.count("send_report") == 0
    assert server.seqs(TASK) == [1]


async def test_while_stopping_the_report_gets_a_single_try(tmp_path: Path) -> None:
    """Once the daemon is stopping the calls go without retries (the outbox retries later)."""
    server = FakeTaskServer()
    budget = ShutdownBudget()
    budget.stop()
    await reporter(TASK, server, settings_in(tmp_path), budget=budget).report(completed())
    assert [(c.method, c.retry) for c in server.calls] == [
        ("report_usage", False),
        ("send_report", False),
    ]
