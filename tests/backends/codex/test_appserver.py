"""`codex app-server` sessions replayed from output recorded off Codex 0.169.0.

The fixtures in tests/fixtures/codex-app-server/ are the server's lines from real runs against
the fake OpenAI API (tests/fakes/openai_api.py), request ids renumbered from 0 as the session
numbers them: `answer` (one message), `shell` (one command, then a message), `quota` (a 429
`insufficient_quota`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from backends.acp import rpc
from backends.base import Message, MessageType, RunStatus
from backends.claude.failure import QUOTA
from backends.codex.approvals import answer_request
from backends.codex.appserver import AppServerSession, Thread
from backends.codex.handshake import HandshakeBoundRun
from backends.process import ProcessSpec, run_process
from tests.fakes.openai_api import USAGE

FIXTURES = Path(__file__).parents[2] / "fixtures" / "codex-app-server"


def replay(name: str, session: AppServerSession) -> tuple[list[Message], list[dict[str, object]]]:
    """Feed a recording to `session`: the messages it made and the lines it wrote back."""
    messages: list[Message] = []
    sent = [json.loads(session.first_line())]
    for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines():
        step = session.feed(line)
        messages += step.messages
        sent += [json.loads(r) for r in step.replies]
    return messages, sent


def test_an_answer_completes_with_text_thread_and_usage() -> None:
    """The recorded answer: text, then a completed result with the thread and its usage."""
    session = AppServerSession(Thread("Do it.", "/w"), "gpt-fake")
    messages, sent = replay("answer", session)
    assert [m["method"] for m in sent] == [
        "initialize",
        "initialized",
        "thread/start",
        "turn/start",
    ]
    assert sent[2]["params"]["approvalPolicy"] == "never"
    assert [m.content for m in messages if m.type is MessageType.TEXT] == ["All done here."]
    result = session.finish(0, "")
    assert result.status is RunStatus.COMPLETED
    assert result.output == "All done here." and result.session_id == session.thread_id != ""
    (usage,) = result.usage
    assert usage.model == "gpt-fake"
    assert usage.input_tokens == USAGE["input_tokens"] - USAGE["cached_tokens"]
    assert usage.cache_read_tokens == USAGE["cached_tokens"]


def test_a_command_is_a_tool_from_its_start_to_its_end() -> None:
    """A command item is tool_use when it starts, output heartbeats, then tool_result."""
    messages, _ = replay("shell", AppServerSession(Thread("Sleep.", "/w")))
    kinds = [m.type for m in messages if m.type is not MessageType.STATUS]
    assert kinds[:3] == [MessageType.TOOL_USE, MessageType.LOG, MessageType.TOOL_RESULT]
    use, beat, done = [m for m in messages if m.type is not MessageType.STATUS][:3]
    assert use.input == {"command": "/bin/bash -lc 'sleep 1 && echo slept'"}
    assert beat.heartbeat and beat.call_id == use.call_id == done.call_id
    assert done.output == "slept\n" and not done.is_error


def test_usage_sums_every_model_call_of_the_turn() -> None:
    """Two model calls in one turn: both calls' tokens are the run's usage."""
    session = AppServerSession(Thread("Sleep.", "/w"))
    replay("shell", session)
    (usage,) = session.finish(0, "").usage
    assert usage.output_tokens == 2 * USAGE["output_tokens"]


def test_a_quota_error_fails_the_run_as_quota() -> None:
    """A 429 insufficient_quota turn fails with the CLI's sentence, read as a quota limit."""
    session = AppServerSession(Thread("Do it.", "/w"))
    messages, _ = replay("quota", session)
    result = session.finish(0, "")
    assert result.status is RunStatus.FAILED
    assert result.failure_reason == QUOTA
    assert "Quota exceeded" in result.error
    assert messages[-1].type is MessageType.RESULT and messages[-1].is_error


def test_a_refused_resume_starts_a_fresh_thread_and_says_so() -> None:
    """thread/resume refused (no rollout): thread/start follows, with a status notice."""
    session = AppServerSession(Thread("Go.", "/w", resume="gone"))
    session.first_line()
    step = session.feed(json.dumps({"id": 0, "result": {}}))
    assert json.loads(step.replies[1])["method"] == "thread/resume"
    refusal = {"id": 1, "error": {"code": -32600, "message": "no rollout found for thread id"}}
    step = session.feed(json.dumps(refusal))
    assert json.loads(step.replies[0])["method"] == "thread/start"
    assert "gone" in step.messages[0].content and step.messages[0].type is MessageType.STATUS


def test_notifications_of_another_thread_are_dropped() -> None:
    """A sub-agent's items (another threadId) are not this turn's messages."""
    session = AppServerSession(Thread("Do it.", "/w"))
    replay("answer", session)
    item = {"type": "agentMessage", "id": "x", "text": "not mine"}
    line = {"method": "item/completed", "params": {"threadId": "other", "item": item}}
    assert session.feed(json.dumps(line)).messages == []


@pytest.mark.parametrize(
    ("method", "answer"),
    [
        ("item/commandExecution/requestApproval", {"decision": "accept"}),
        ("item/fileChange/requestApproval", {"decision": "accept"}),
        ("execCommandApproval", {"decision": "accept"}),
        ("mcpServer/elicitation/request", {"action": "accept", "content": None}),
    ],
)
def test_approval_requests_are_accepted(method: str, answer: dict[str, object]) -> None:
    """Every approval the server asks for is accepted at once."""
    line = answer_request(rpc.Frame("request", id=7, method=method))
    assert json.loads(line) == {"jsonrpc": "2.0", "id": 7, "result": answer}


def test_permissions_are_granted_for_the_turn_only_as_asked() -> None:
    """A permissions request gets its network and file-system grants, scoped to the turn."""
    asked = {"network": {"enabled": True}, "somethingNew": {}}
    method = "item/permissions/requestApproval"
    frame = rpc.Frame("request", id=3, method=method, params={"permissions": asked})
    result = json.loads(answer_request(frame))["result"]
    assert result == {"permissions": {"network": {"enabled": True}}, "scope": "turn"}


def test_an_unknown_request_is_refused_not_left_waiting() -> None:
    """A request the daemon does not serve gets "method not found" at once."""
    line = answer_request(rpc.Frame("request", id=4, method="item/tool/call"))
    assert json.loads(line)["error"]["code"] == rpc.METHOD_NOT_FOUND


@pytest.mark.anyio
async def test_a_silent_handshake_fails_naming_the_request() -> None:
    """No answer to initialize within the bound: the run ends, naming the request."""
    session = AppServerSession(Thread("Do it.", "/w"))
    silent = [sys.executable, "-c", "import time; time.sleep(60)"]
    first = session.first_line()
    spec = ProcessSpec(silent, Path("/"), {}, first, keep_stdin_open=True, kill_grace=0.5)
    with anyio.fail_after(10):
        async with run_process(spec, session) as run:
            bounded = HandshakeBoundRun(run, session, 0.3)
            assert [m async for m in bounded.messages()] == []
            result = await bounded.result()
    assert result.status is RunStatus.FAILED
    assert (
        result.error == "codex app-server handshake timeout: initialize did not respond after 0.3s"
    )


def test_items_before_the_turn_is_asked_for_are_dropped() -> None:
    """An item notified while the thread is still being opened is not this turn's."""
    session = AppServerSession(Thread("Do it.", "/w"))
    session.first_line()
    session.feed(json.dumps({"id": 0, "result": {}}))
    item = {"type": "agentMessage", "id": "x", "text": "old"}
    line = {"method": "item/completed", "params": {"item": item}}
    assert session.feed(json.dumps(line)).messages == []


def test_a_turn_end_before_the_turn_id_is_known_still_ends_the_run() -> None:
    """turn/completed ahead of turn/start's answer ends the run; another turn's end does not."""
    session = AppServerSession(Thread("Do it.", "/w"))
    session.first_line()
    session.feed(json.dumps({"id": 0, "result": {}}))
    session.feed(json.dumps({"id": 1, "result": {"thread": {"id": "t"}}}))
    done = {"threadId": "t", "turn": {"id": "z", "status": "completed"}}
    step = session.feed(json.dumps({"method": "turn/completed", "params": done}))
    assert step.close_stdin and session.finish(0, "").status is RunStatus.COMPLETED
    other = {"threadId": "t", "turn": {"id": "y", "status": "failed"}}
    assert session.feed(json.dumps({"method": "turn/completed", "params": other})).messages == []
