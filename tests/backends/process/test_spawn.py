"""Tests for the process helper, on real `sys.executable -c` children."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from backends.base import ParseStep, RunResult
from backends.process import (
    MAX_LINE_BYTES,
    TRACKING_ENV,
    LineFramer,
    ProcessRegistry,
    ProcessRun,
    ProcessSpec,
    ProcIdentity,
    clean_line,
    descendants,
    identify,
    run_process,
    tagged,
)
from daemon.testing import python, survivors
from tests.backends.support import (
    SLEEPER,
    TREE_CHILD,
    LinesParser,
    RecordingObserver,
    identities,
    tree_pids,
)
from tests.helpers import eventually

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="/proc is Linux only")


def spec_for(code: str, tmp_path: Path, **fields: Any) -> ProcessSpec:
    """A spec running `code` in `tmp_path` with a tiny environment and a recording observer."""
    fields.setdefault("observer", RecordingObserver())
    return ProcessSpec(argv=python(code), cwd=tmp_path, env={"LC_ALL": "C.UTF-8"}, **fields)


async def contents(run: ProcessRun) -> list[str]:
    """Every message's content until stdout closes."""
    return [message.content async for message in run.messages()]


async def next_content(run: ProcessRun) -> str:
    return (await anext(aiter(run.messages()))).content


def observer_of(spec: ProcessSpec) -> RecordingObserver:
    assert isinstance(spec.observer, RecordingObserver)
    return spec.observer


# -- framing and cleaning ----------------------------------------------------------------


def test_framer_joins_lines_split_across_chunks() -> None:
    """A line arriving in pieces is delivered once, whole."""
    framer = LineFramer(cap=100)
    assert framer.feed(b"hel") == []
    assert framer.feed(b"lo\nwor") == [b"hello"]
    assert framer.feed(b"ld\n\n") == [b"world", b""]
    assert framer.flush() is None


def test_framer_cuts_a_long_line_and_drops_its_rest() -> None:
    """An over-long line is cut at the cap; the rest of it up to the newline is discarded."""
    framer = LineFramer(cap=4)
    assert framer.feed(b"abcdef") == [b"abcd"]
    assert framer.feed(b"ghij") == []
    assert framer.feed(b"kl\nnext\ntail") == [b"next"]
    assert framer.flush() == b"tail"
    assert framer.cut_lines == 1


def test_clean_line_drops_nul_and_replaces_invalid_utf8() -> None:
    """NUL bytes vanish, invalid UTF-8 becomes U+FFFD, a CR before the newline goes."""
    assert clean_line(b"a\x00b\xffc\xc3\xa9\r") == "ab\ufffdcé"


@pytest.mark.anyio
async def test_a_40_mib_line_is_cut_and_the_next_line_arrives(tmp_path: Path) -> None:
    """A 40 MiB line arrives cut to 32 MiB and the line after it arrives intact."""
    code = """
        import sys
        sys.stdout.buffer.write(b"x" * (40 * 1024 * 1024) + b"\\nafter\\n")
    """
    async with run_process(spec_for(code, tmp_path), LinesParser()) as run:
        lines = await contents(run)
    assert [len(line) for line in lines] == [MAX_LINE_BYTES, 5]
    assert lines[1] == "after"


@pytest.mark.anyio
async def test_output_is_cleaned_before_parsing(tmp_path: Path) -> None:
    """NUL bytes and invalid UTF-8 from the child never reach the parser."""
    code = r"""
        import sys
        sys.stdout.buffer.write(b"a\x00b\xffc\n")
    """
    async with run_process(spec_for(code, tmp_path), LinesParser()) as run:
        assert await contents(run) == ["ab\ufffdc"]


@pytest.mark.anyio
async def test_stderr_tail_is_bounded_and_ends_with_the_last_bytes(tmp_path: Path) -> None:
    """100 KiB of stderr leaves at most the tail size, ending with what was written last."""
    code = """
        import sys
        sys.stderr.write("e" * 100_000 + "END")
        sys.exit(3)
    """
    parser = LinesParser()
    async with run_process(spec_for(code, tmp_path), parser) as run:
        await contents(run)
        result = await run.result()
    assert result.exit_code == 3
    assert parser.finished_with is not None
    exit_code, tail = parser.finished_with
    assert exit_code == 3
    assert tail.endswith("eeeEND") and len(tail) <= 8 * 1024


# -- stdin ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stdin_is_written_while_stdout_is_read(tmp_path: Path) -> None:
    """A child writing 2 MiB before reading a 2 MiB stdin completes (no deadlock)."""
    code = """
        import sys
        for _ in range(20_000):
            sys.stdout.write("o" * 100 + "\\n")
        sys.stdout.flush()
        print("read", len(sys.stdin.buffer.read()))
    """
    spec = spec_for(code, tmp_path, stdin_data=b"i" * (2 * 1024 * 1024))
    with anyio.fail_after(60):
        async with run_process(spec, LinesParser()) as run:
            lines = await contents(run)
            result = await run.result()
    assert len(lines) == 20_001
    assert lines[-1] == f"read {2 * 1024 * 1024}"
    assert result.exit_code == 0


class _ReplyingParser(LinesParser):
    """Answers the line `question` with two lines, then closes stdin."""

    def feed(self, line: str) -> ParseStep:
        step = super().feed(line)
        if line == "question":
            step.replies = [b"one", b"two\n"]
            step.close_stdin = True
        return step


ECHO_STDIN = """
    import sys
    print("question", flush=True)
    for line in sys.stdin:
        print("got", line.strip(), flush=True)
    print("eof", flush=True)
"""


@pytest.mark.anyio
async def test_parser_replies_are_written_in_order_then_stdin_closed(tmp_path: Path) -> None:
    """ParseStep replies reach stdin in order, and close_stdin ends the child's input."""
    spec = spec_for(ECHO_STDIN, tmp_path, keep_stdin_open=True)
    with anyio.fail_after(30):
        async with run_process(spec, _ReplyingParser()) as run:
            assert await contents(run) == ["question", "got one", "got two", "eof"]


@pytest.mark.anyio
async def test_write_line_and_close_stdin(tmp_path: Path) -> None:
    """Lines written by the caller follow the initial stdin data; close_stdin ends input."""
    spec = spec_for(ECHO_STDIN, tmp_path, stdin_data=b"first\n", keep_stdin_open=True)
    with anyio.fail_after(30):
        async with run_process(spec, LinesParser()) as run:
            await run.write_line(b"second")
            await run.close_stdin()
            assert await contents(run) == ["question", "got first", "got second", "eof"]


# -- parsing hooks -----------------------------------------------------------------------


class _PickyParser(LinesParser):
    """Marks lines starting with `bad` invalid and fails outright on `boom`."""

    def feed(self, line: str) -> ParseStep:
        if line == "boom":
            raise RuntimeError("parser bug")
        if line.startswith("bad"):
            return ParseStep(invalid=True)
        return super().feed(line)


@pytest.mark.anyio
async def test_invalid_and_unparseable_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    """Invalid lines and lines the parser chokes on are counted; later lines still arrive."""
    spec = spec_for('print("bad 1\\nboom\\nbad 2\\ngood")', tmp_path)
    async with run_process(spec, _PickyParser()) as run:
        assert await contents(run) == ["good"]
    assert observer_of(spec).invalid == 3


@pytest.mark.anyio
async def test_pending_counts_messages_not_yet_taken(tmp_path: Path) -> None:
    """pending() is the number of parsed messages the consumer has not taken yet."""
    async with run_process(spec_for('print("1\\n2\\n3\\n4\\n5")', tmp_path), LinesParser()) as run:
        with anyio.fail_after(20):
            await run.result()  # returns once stdout closed: every line has been parsed
        assert run.pending() == 5
        assert await next_content(run) == "1"
        assert run.pending() == 4
        assert await contents(run) == ["2", "3", "4", "5"]
        assert run.pending() == 0


@pytest.mark.anyio
async def test_agent_environment_carries_the_tracking_tag(tmp_path: Path) -> None:
    """The child gets the given environment plus the tracking variable set to the task id."""
    code = f"""
        import os
        print(os.environ["{TRACKING_ENV}"], os.environ["LC_ALL"], os.getcwd())
    """
    async with run_process(spec_for(code, tmp_path, task_id="task-42"), LinesParser()) as run:
        assert await contents(run) == [f"task-42 C.UTF-8 {tmp_path}"]


# -- stopping ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_child_that_exits_normally_gets_no_signal(tmp_path: Path) -> None:
    """A run whose process already exited ends without any signal sent."""
    spec = spec_for('print("hi")', tmp_path)
    async with run_process(spec, LinesParser()) as run:
        assert await contents(run) == ["hi"]
        assert (await run.result()).exit_code == 0
    assert observer_of(spec).signals == []


IGNORES_SIGTERM = """
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(120)
"""


@pytest.mark.anyio
async def test_a_child_ignoring_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    """SIGTERM, the grace, then SIGKILL: the run ends and the observer saw both, in order."""
    spec = spec_for(IGNORES_SIGTERM, tmp_path, kill_grace=0.3)
    async with run_process(spec, LinesParser()) as run:
        assert await next_content(run) == "ready"
        leader = identities([run.pid])
        started = time.monotonic()
    assert time.monotonic() - started >= 0.3
    assert observer_of(spec).signals == ["SIGTERM", "SIGKILL"]
    assert run.returncode == -signal.SIGKILL
    assert survivors(leader) == []


async def _tree_of(run: ProcessRun) -> list[ProcIdentity]:
    """The leader, grandchild and great-grandchild of a TREE_CHILD run."""
    tree = identities([run.pid, *tree_pids(await next_content(run))])
    assert os.getsid(tree[1].pid) != os.getsid(run.pid)
    return tree


@pytest.mark.anyio
async def test_leaving_the_context_kills_a_tree_spread_over_sessions(tmp_path: Path) -> None:
    """A grandchild in its own session and its child die with the leader."""
    spec = spec_for(TREE_CHILD, tmp_path, kill_grace=2.0)
    async with run_process(spec, LinesParser()) as run:
        tree = await _tree_of(run)
    assert survivors(tree) == []
    assert observer_of(spec).signals.count("SIGTERM") == 2  # the leader's group and the setsid one
    assert "SIGKILL" not in observer_of(spec).signals


@pytest.mark.anyio
async def test_cancelling_the_enclosing_scope_kills_the_tree(tmp_path: Path) -> None:
    """A cancelled enclosing scope (what the watchdog does) still kills the whole tree."""
    spec = spec_for(TREE_CHILD, tmp_path, kill_grace=2.0)
    tree: list[ProcIdentity] = []
    with anyio.CancelScope() as scope:
        async with run_process(spec, LinesParser()) as run:
            tree = await _tree_of(run)
            scope.cancel()
            await anyio.sleep(60)
    assert scope.cancelled_caught
    assert len(tree) == 3 and survivors(tree) == []


@pytest.mark.anyio
async def test_cancellation_from_another_task_kills_the_tree(tmp_path: Path) -> None:
    """A watchdog-like task cancelling the run's scope while the drain waits kills the tree."""
    spec = spec_for(TREE_CHILD, tmp_path, kill_grace=2.0)
    tree: list[ProcIdentity] = []
    started = anyio.Event()

    async def drain(scope: anyio.CancelScope) -> None:
        with scope:
            async with run_process(spec, LinesParser()) as run:
                tree.extend(await _tree_of(run))
                started.set()
                await contents(run)

    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()
        tg.start_soon(drain, scope)
        with anyio.fail_after(30):
            await started.wait()
        scope.cancel()
    assert survivors(tree) == []


@pytest.mark.anyio
async def test_an_error_in_the_body_propagates_unchanged_and_kills(tmp_path: Path) -> None:
    """The caller's own exception comes out as itself (no group) after the kill."""
    spec = spec_for(IGNORES_SIGTERM, tmp_path, kill_grace=0.2)
    leader: Sequence[ProcIdentity] = ()
    with pytest.raises(ValueError, match="drain failed"):
        async with run_process(spec, LinesParser()) as run:
            assert await next_content(run) == "ready"
            leader = identities([run.pid])
            raise ValueError("drain failed")
    assert survivors(leader) == []


@pytest.mark.anyio
async def test_strays_left_by_a_finished_leader_are_swept_by_tag(tmp_path: Path) -> None:
    """A daemonised grandchild that outlives a normally exiting leader is killed by its tag."""
    code = """
        import subprocess, sys
        stray = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(120)"],
            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        print(stray.pid)
    """
    spec = spec_for(code, tmp_path, task_id=f"sweep-{os.getpid()}-{time.monotonic_ns()}")
    async with run_process(spec, LinesParser()) as run:
        stray = identities([int(await next_content(run))])
        assert (await run.result()).exit_code == 0
        assert identify(run.pid) is None
        assert tagged(TRACKING_ENV, spec.task_id) == stray
    assert survivors(stray) == []
    assert observer_of(spec).signals == ["SIGTERM"]


DETACHES_AFTER_A_WHILE = """
    import subprocess, sys, time
    # A middle process with a clean environment starts a sleeper in its own session, in /,
    # and exits once told to: the sleeper then has no tag, no parent link and no work dir.
    middle_code = (
        "import os, subprocess, sys; os.chdir('/');"
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'],"
        " start_new_session=True, stdout=subprocess.DEVNULL);"
        "print(c.pid, flush=True); sys.stdin.read()"
    )
    middle = subprocess.Popen(
        [sys.executable, "-c", middle_code], env={}, stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    print(int(middle.stdout.readline()), flush=True)
    sys.stdin.readline()
    middle.stdin.close()
    middle.wait()
    print("detached", flush=True)
    time.sleep(120)
"""


@pytest.mark.anyio
async def test_a_process_seen_below_the_agent_dies_after_it_detached(tmp_path: Path) -> None:
    """A sleeper once seen below the agent is killed even after it lost tag, parent and cwd."""
    registry = ProcessRegistry()
    spec = spec_for(
        DETACHES_AFTER_A_WHILE, tmp_path, keep_stdin_open=True, kill_grace=2.0, processes=registry
    )
    with anyio.fail_after(60):
        async with run_process(spec, LinesParser()) as run:
            sleeper = identities([int(await next_content(run))])
            await eventually(lambda: sleeper[0] in registry.members(run.pid), within=30)
            await run.write_line(b"detach")
            assert await next_content(run) == "detached"
            assert sleeper[0] not in descendants(run.pid)
    assert survivors(sleeper) == []


@pytest.mark.anyio
async def test_result_reports_a_kill_by_signal(tmp_path: Path) -> None:
    """A child killed by a signal reports the negative signal number to the parser."""
    spec = spec_for("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", tmp_path)
    parser = LinesParser()
    async with run_process(spec, parser) as run:
        assert await contents(run) == []
        result: RunResult = await run.result()
    assert result.exit_code == -signal.SIGKILL
    assert parser.finished_with == (-signal.SIGKILL, "")


@pytest.mark.anyio
async def test_a_run_records_its_processes_in_its_specs_registry_only(tmp_path: Path) -> None:
    """Two runs given two registries: each records its own child, neither the other run's."""
    registries = [ProcessRegistry(), ProcessRegistry()]
    specs = [
        spec_for(CHILD_THEN_WAIT, tmp_path, keep_stdin_open=True, processes=r) for r in registries
    ]
    with anyio.fail_after(60):
        async with (
            run_process(specs[0], LinesParser()) as a,
            run_process(specs[1], LinesParser()) as b,
        ):
            children = [identities([int(await next_content(run))]) for run in (a, b)]
            for registry, run, child in zip(registries, (a, b), children, strict=True):
                await eventually(partial(_members_include, registry, run.pid, child), within=30)
            assert registries[0].members(b.pid) == [] and registries[1].members(a.pid) == []
    assert survivors([*children[0], *children[1]]) == []


CHILD_THEN_WAIT = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {SLEEPER!r}])
print(child.pid, flush=True)
sys.stdin.read()
"""
"""An agent that starts one sleeping child, prints its pid, and waits for stdin to close."""


def _members_include(registry: ProcessRegistry, pid: int, wanted: list[ProcIdentity]) -> bool:
    return set(wanted) <= set(registry.members(pid))


_ASKS = 1200
"""More questions than the agent's stdin pipe (64 KiB of 4 KiB answers) and the stdin queue
(1,024) hold together, so the consumer's parse waits for room."""
_ASKING_AGENT = f"""
import sys, time
sys.stdout.write("ask\\n" * {_ASKS} + "m1\\nm2\\n"); sys.stdout.flush()
time.sleep(0.5)
sys.stdout.write("late\\n"); sys.stdout.flush()
time.sleep(1.0)
left = {_ASKS} * 4096
while left > 0:
    left -= len(sys.stdin.buffer.read1(1 << 20))
"""


class _AskingParser(LinesParser):
    """Every `ask` line wants a 4 KiB answer on the agent's stdin."""

    def feed(self, line: str) -> ParseStep:
        step = super().feed(line)
        if line == "ask":
            step.replies.append(b"x" * 4095)
        return step


@pytest.mark.anyio
async def test_the_pump_reads_only_after_the_consumers_read_and_parse_are_done(
    tmp_path: Path,
) -> None:
    """The result is asked for while the consumer's parse waits for room on stdin: the pump
    that takes over stdout waits for that parse, so the line printed later comes after it."""
    spec = spec_for(_ASKING_AGENT, tmp_path, keep_stdin_open=True)
    seen: list[str] = []
    async with run_process(spec, _AskingParser()) as run:

        async def consume() -> None:
            seen.extend([message.content async for message in run.messages()])

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await anyio.sleep(1.0)  # `late` is printed; the consumer's parse still waits
            with anyio.fail_after(20):
                assert (await run.result()).exit_code == 0
    assert seen == ["ask"] * _ASKS + ["m1", "m2", "late"]
