"""Tests for the scripted backend: every step kind, replayed by a real child process."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from backends.base import Message, MessageType, RunResult, RunSpec, RunStatus, Usage
from backends.process import ProcessRegistry, ProcIdentity
from backends.scripted import Script, ScriptedBackend
from daemon.testing import survivors
from tests.backends.support import RecordingObserver, identities, tree_pids
from tests.helpers import eventually

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux only")


@dataclass
class Replay:
    """What one scripted run produced, with each message's arrival time since the start."""

    messages: list[Message]
    arrivals: list[float]
    result: RunResult
    observer: RecordingObserver

    def of(self, kind: MessageType) -> list[Message]:
        return [m for m in self.messages if m.type is kind]


def spec(prompt: str | Script, tmp_path: Path, **fields: Any) -> RunSpec:
    text = prompt.dumps() if isinstance(prompt, Script) else prompt
    fields.setdefault("observer", RecordingObserver())
    return RunSpec(prompt=text, workdir=tmp_path, env={}, task_id="", **fields)


async def replay(prompt: str | Script, tmp_path: Path, **fields: Any) -> Replay:
    """Run a script to the end (bounded)."""
    run_spec = spec(prompt, tmp_path, **fields)
    messages: list[Message] = []
    arrivals: list[float] = []
    started = time.monotonic()
    with anyio.fail_after(60):
        async with ScriptedBackend().start(run_spec) as run:
            async for message in run.messages():
                messages.append(message)
                arrivals.append(time.monotonic() - started)
            result = await run.result()
    assert isinstance(run_spec.observer, RecordingObserver)
    return Replay(messages, arrivals, result, run_spec.observer)


@pytest.mark.anyio
async def test_detect_reports_the_version_and_script_format() -> None:
    """The scripted backend is always available and names its script format."""
    version = await ScriptedBackend().detect()
    assert version is not None and version.endswith("(script format 1)")


@pytest.mark.anyio
async def test_a_prompt_without_a_script_is_echoed(tmp_path: Path) -> None:
    """Plain prompt text comes back as a text message and as the result's output."""
    done = await replay("hello there\nsecond line", tmp_path)
    assert [m.type for m in done.messages] == [MessageType.TEXT, MessageType.RESULT]
    assert done.messages[0].content == "hello there\nsecond line"
    assert done.result.status is RunStatus.COMPLETED
    assert done.result.output == "hello there\nsecond line"
    assert done.result.session_id.startswith("scripted-")


@pytest.mark.anyio
async def test_an_echo_resumes_the_given_session(tmp_path: Path) -> None:
    """A resumed echo run reports the session it was asked to resume."""
    done = await replay("continue", tmp_path, resume_session_id="s-old")
    assert done.result.session_id == "s-old"


@pytest.mark.anyio
async def test_end_if_resumed_ends_a_resumed_run_and_is_skipped_otherwise(tmp_path: Path) -> None:
    """Resumed, the run names its session and ends there; fresh, the script goes on."""
    script = Script().end_if_resumed().text("fresh work").result("done", session_id="s-new")
    resumed = await replay(script.dumps(), tmp_path, resume_session_id="s-old")
    assert [m.session_id for m in resumed.of(MessageType.STATUS)] == ["s-old"]
    assert resumed.of(MessageType.TEXT) == []
    assert (resumed.result.output, resumed.result.session_id) == ("resumed s-old", "s-old")
    fresh = await replay(script.dumps(), tmp_path)
    assert [m.content for m in fresh.of(MessageType.TEXT)] == ["fresh work"]
    assert fresh.result.session_id == "s-new"


@pytest.mark.anyio
async def test_a_script_embedded_in_prompt_text_is_run(tmp_path: Path) -> None:
    """A script inside surrounding prompt text is found and run."""
    prompt = f"Instructions first.\n\n{Script().text('from the script').dumps()}\nThanks!"
    done = await replay(prompt, tmp_path)
    assert [m.content for m in done.messages] == ["from the script"]


@pytest.mark.anyio
async def test_emit_and_text_print_protocol_messages(tmp_path: Path) -> None:
    """`emit` prints any protocol message as given; `text` is the text shorthand."""
    script = Script().emit("thinking", content="hmm").text("said").emit("log", content="note")
    done = await replay(script, tmp_path)
    assert done.messages == [
        Message(MessageType.THINKING, content="hmm"),
        Message(MessageType.TEXT, content="said"),
        Message(MessageType.LOG, content="note"),
    ]
    assert done.result.output == "said"


@pytest.mark.anyio
async def test_sleep_is_silence(tmp_path: Path) -> None:
    """Nothing after a sleep arrives before the sleep has passed."""
    done = await replay(Script().text("before").sleep(0.4).text("after"), tmp_path)
    assert [m.content for m in done.messages] == ["before", "after"]
    assert done.arrivals[1] >= 0.4


@pytest.mark.anyio
async def test_burst_prints_many_lines(tmp_path: Path) -> None:
    """A burst delivers exactly `count` copies of its message."""
    message = {"type": "log", "content": "tick"}
    done = await replay(Script().burst(5000, message).text("end"), tmp_path)
    assert done.of(MessageType.LOG) == [Message(MessageType.LOG, content="tick")] * 5000
    assert done.messages[-1].content == "end"


@pytest.mark.anyio
async def test_tool_is_a_use_silence_and_result(tmp_path: Path) -> None:
    """A tool step is tool_use, silence for `seconds`, then the matching tool_result."""
    script = Script().tool("Bash", "c1", {"command": "make"}, seconds=0.4, output="built")
    done = await replay(script, tmp_path)
    assert done.messages == [
        Message(MessageType.TOOL_USE, tool="Bash", call_id="c1", input={"command": "make"}),
        Message(MessageType.TOOL_RESULT, call_id="c1", output="built"),
    ]
    assert done.arrivals[1] >= 0.4


@pytest.mark.anyio
async def test_tool_without_a_call_id_gets_a_fresh_one(tmp_path: Path) -> None:
    """Tool calls without an explicit id get distinct ids shared by use and result."""
    done = await replay(Script().tool("Read").tool("Read"), tmp_path)
    ids = [m.call_id for m in done.messages]
    assert ids[0] == ids[1] != ids[2] == ids[3]
    assert all(ids)


@pytest.mark.anyio
async def test_result_sets_output_session_and_usage(tmp_path: Path) -> None:
    """The result step's output, session id and usage become the run's result."""
    usage = {"input_tokens": 7, "output_tokens": 3}
    done = await replay(Script().text("x").result("done", session_id="s1", usage=usage), tmp_path)
    assert done.result == RunResult(
        RunStatus.COMPLETED,
        output="done",
        session_id="s1",
        usage=(Usage("scripted", "", input_tokens=7, output_tokens=3),),
        exit_code=0,
    )


@pytest.mark.anyio
async def test_stderr_and_exit_fail_the_run_with_the_stderr_text(tmp_path: Path) -> None:
    """`stderr` writes to stderr; `exit` ends the script there with its code."""
    done = await replay(Script().stderr("careful now").exit(4).text("never"), tmp_path)
    assert done.messages == []
    assert done.result.status is RunStatus.FAILED
    assert done.result.error == "exit code 4: careful now"
    assert done.result.exit_code == 4


@pytest.mark.anyio
async def test_crash_dies_by_the_signal(tmp_path: Path) -> None:
    """`crash` ends the child by the named signal, reported as such."""
    done = await replay(Script().text("going down").crash("SIGSEGV"), tmp_path)
    assert done.result.exit_code == -signal.SIGSEGV
    assert done.result.error == "killed by SIGSEGV: no error output"
    assert [p async for p in anyio.Path(tmp_path).iterdir()] == []  # and no core file


@pytest.mark.anyio
async def test_a_malformed_script_is_rejected_before_any_step(tmp_path: Path) -> None:
    """A bad step stops the script before it starts: an error message and exit 2."""
    prompt = json.dumps({"steps": [{"text": "first"}, {"sleep": -1}]})
    done = await replay(prompt, tmp_path)
    assert [m.type for m in done.messages] == [MessageType.ERROR]
    assert done.result.status is RunStatus.FAILED
    assert done.result.exit_code == 2
    assert "step 2 (sleep): expected a number of seconds >= 0, got -1" in done.result.error


@pytest.mark.anyio
async def test_hang_never_ends_until_the_run_is_stopped(tmp_path: Path) -> None:
    """After `hang` nothing more arrives; leaving the context stops it with SIGTERM."""
    run_spec = spec(Script().text("stuck").hang(), tmp_path)
    async with ScriptedBackend().start(run_spec) as run:
        stream = aiter(run.messages())
        assert (await anext(stream)).content == "stuck"
        with anyio.move_on_after(0.5) as waited:
            await anext(stream)
        leader = identities([run.pid])
    assert waited.cancelled_caught
    assert survivors(leader) == []
    assert isinstance(run_spec.observer, RecordingObserver)
    assert run_spec.observer.signals == ["SIGTERM"]


@pytest.mark.anyio
async def test_ignore_sigterm_forces_a_sigkill(tmp_path: Path) -> None:
    """A script ignoring SIGTERM is only ended by SIGKILL after the grace."""
    run_spec = spec(Script().ignore_sigterm().text("ready").hang(), tmp_path, kill_grace=0.3)
    async with ScriptedBackend().start(run_spec) as run:
        assert (await anext(aiter(run.messages()))).content == "ready"
    assert run.returncode == -signal.SIGKILL
    assert isinstance(run_spec.observer, RecordingObserver)
    assert run_spec.observer.signals == ["SIGTERM", "SIGKILL"]


async def _tree(messages: Any) -> list[ProcIdentity]:
    message = await anext(messages)
    assert message.type is MessageType.LOG
    return identities(tree_pids(message.content))


@pytest.mark.anyio
async def test_spawn_tree_starts_a_sleeping_chain_in_a_new_session(tmp_path: Path) -> None:
    """The grandchild has its own session, the great-grandchild hangs below it; both die."""
    run_spec = spec(Script().spawn_tree(depth=2).hang(), tmp_path)
    async with ScriptedBackend().start(run_spec) as run:
        grandchild, great = await _tree(aiter(run.messages()))
        assert os.getsid(grandchild.pid) == grandchild.pid != os.getsid(run.pid)
        assert os.getpgid(great.pid) == os.getsid(great.pid) == grandchild.pid
        tree = [*identities([run.pid]), grandchild, great]
    assert survivors(tree) == []


@pytest.mark.anyio
async def test_a_tree_holding_stdout_keeps_the_stream_open(tmp_path: Path) -> None:
    """With `hold_stdout`, the stream outlives the leader until the tree is killed."""
    script = Script().spawn_tree(depth=1, hold_stdout=True).result("done").exit(0)
    run_spec = spec(script, tmp_path)
    async with ScriptedBackend().start(run_spec) as run:
        assert run.leader is not None
        stream = aiter(run.messages())
        tree = await _tree(stream)
        assert (await anext(stream)).type is MessageType.RESULT
        assert await anyio.to_thread.run_sync(survivors, [run.leader], 20) == []
        with anyio.move_on_after(0.3) as waited:
            await anext(stream)
    assert waited.cancelled_caught
    assert run.returncode == 0
    assert survivors(tree) == []


@pytest.mark.anyio
async def test_each_run_records_its_tree_in_the_registry_its_spec_carries(tmp_path: Path) -> None:
    """Two runs at once, each given its own registry: each registry sees only its run's tree."""
    registries = [ProcessRegistry(), ProcessRegistry()]
    specs = [spec(Script().spawn_tree(depth=1).hang(), tmp_path, processes=r) for r in registries]
    backend = ScriptedBackend()
    with anyio.fail_after(60):
        async with backend.start(specs[0]) as first, backend.start(specs[1]) as second:
            trees = [await _tree(aiter(first.messages())), await _tree(aiter(second.messages()))]
            for registry, run, tree in zip(registries, (first, second), trees, strict=True):
                await eventually(partial(_recorded, registry, run.pid, tree), within=30)
            assert registries[0].members(second.pid) == []
            assert registries[1].members(first.pid) == []
    assert survivors([*trees[0], *trees[1]]) == []


def _recorded(registry: ProcessRegistry, pid: int, tree: list[ProcIdentity]) -> bool:
    return set(tree) <= set(registry.members(pid))
