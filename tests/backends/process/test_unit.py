"""A contained run is one kernel unit: its own pid namespace and cgroups, on real processes.

These need root (as CI has): the namespace and the cgroups are made as root, and the agent
runs as a user the test creates where the test says so.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from backends.base import RunStatus
from backends.process import ProcessRegistry, ProcessSpec, ProcIdentity, run_process
from backends.process.cgroups import Limits, prepare
from backends.process.identity import AgentUser
from backends.process.registry import TRACK_INTERVAL
from backends.process.tree import ProcessTable, subtree_table
from backends.process.unit import OUT_OF_MEMORY, Containment, find_tools, probe_namespace
from daemon.testing import python
from daemon.testing.processes import named
from tests.backends.support import LinesParser, RecordingObserver
from tests.fakes.system_user import agent_python
from tests.helpers import eventually

pytestmark = [pytest.mark.anyio, pytest.mark.root]

# A process whose main thread leaves (SYS_exit, the thread alone) while a second thread
# runs on: /proc shows its leader as a zombie. It detaches first (double fork, setsid, an
# empty environment), names itself by `argv[1]`, says it runs by creating `argv[2]` and
# writes its outer pid nowhere: only a look at every process finds it.
SURVIVOR = """
import os, sys
if os.fork():
    os._exit(0)
os.setsid()
if os.fork():
    os._exit(0)
os.execve(sys.executable, [sys.executable, "-c", '''
import ctypes, sys, threading, time
def spin():
    open(sys.argv[2], "w").close()
    while True:
        time.sleep(0.05)
threading.Thread(target=spin).start()
ctypes.CDLL(None).syscall(60, 0)
''', *sys.argv[1:]], {})
"""


@pytest.fixture
def contained(tmp_path: Path) -> Iterator[Containment]:
    """The host's containment with small limits, under a key of this test's own."""
    tools = find_tools()
    mode, why = probe_namespace(tools, as_root=True)
    assert mode == "root", why
    limits = Limits(memory_bytes=64 << 20, pids=40, cpu_weight=100)
    home, why = prepare(limits, f"test-{os.getpid()}-{tmp_path.name[-12:]}")
    assert home is not None, why
    found = Containment(namespace=True, cgroups=home, tools=tools)
    try:
        yield found
    finally:
        found.close()


def _spec(code: str, tmp_path: Path, containment: Containment, **more: object) -> ProcessSpec:
    fields: dict[str, object] = {"observer": RecordingObserver(), "kill_grace": 2.0, **more}
    return ProcessSpec(
        argv=python(code),
        cwd=tmp_path,
        env={"LC_ALL": "C.UTF-8", "PATH": os.environ["PATH"]},
        containment=containment,
        **fields,  # type: ignore[arg-type]
    )


async def _lines(spec: ProcessSpec) -> tuple[list[str], object]:
    parser = LinesParser()
    async with run_process(spec, parser) as run:
        lines = [m.content async for m in run.messages()]
        result = await run.result()
    return lines, result


async def test_the_agent_runs_second_in_a_pid_namespace_of_its_own(
    tmp_path: Path, contained: Containment
) -> None:
    """The agent sees itself as pid 2 (the launcher is 1) in another namespace than ours."""
    code = "import os; print(os.getpid()); print(os.readlink('/proc/self/ns/pid'))"
    lines, _ = await _lines(_spec(code, tmp_path, contained))
    assert lines[0] == "2"
    assert lines[1] != os.readlink("/proc/self/ns/pid")


async def test_a_thread_outliving_its_leader_dies_with_the_run(
    tmp_path: Path, contained: Containment
) -> None:
    """A detached process whose leader thread exited while another runs on is gone once the
    agent that started it has ended."""
    marker, started = f"survivor-{tmp_path.name}", tmp_path / "started"
    code = f"""
        import os, subprocess, sys, time
        subprocess.run([sys.executable, "-c", {SURVIVOR!r}, {marker!r}, {str(started)!r}])
        while not os.path.exists({str(started)!r}):
            time.sleep(0.01)
        print("left")
    """
    lines, _ = await _lines(_spec(code, tmp_path, contained))
    assert lines == ["left"] and started.exists()
    await eventually(lambda: not named(marker), within=5.0, what="the survivor gone")


async def test_sigterm_reaches_the_agent_and_its_exit_status_is_its_own(
    tmp_path: Path, contained: Containment
) -> None:
    """A graceful stop gives the agent (not the launcher) SIGTERM; its status is reported as
    a plain spawn's would be, a kill by signal as the negative signal number."""
    code = """
        import signal, sys, time
        def stop(*_):
            sys.stderr.write("term")
            sys.exit(3)
        signal.signal(signal.SIGTERM, stop)
        print("ready", flush=True)
        time.sleep(60)
    """
    with anyio.fail_after(20):
        async with run_process(_spec(code, tmp_path, contained), LinesParser()) as run:
            assert (await anext(aiter(run.messages()))).content == "ready"
    assert (run.returncode, run.stderr_tail()) == (3, "term")
    killed = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    _, result = await _lines(_spec(killed, tmp_path, contained))
    assert result.exit_code == -9  # type: ignore[attr-defined]


async def test_a_run_past_its_memory_limit_fails_out_of_memory_and_nothing_else_does(
    tmp_path: Path, contained: Containment
) -> None:
    """An agent allocating past the task's memory limit is killed in its own group and its
    run fails `agent_error.out_of_memory`; a run beside it completes."""
    hog = "x = bytearray(256 << 20); x[::4096] = b'y' * len(x[::4096]); print('survived')"
    calm = "import time; time.sleep(0.3); print('calm')"
    observer = RecordingObserver()
    results: dict[str, object] = {}

    async def one(name: str, code: str) -> None:
        results[name] = await _lines(_spec(code, tmp_path, contained, observer=observer))

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "hog", hog)
        tg.start_soon(one, "calm", calm)
    hog_lines, hog_result = results["hog"]  # type: ignore[misc]
    assert hog_lines == []
    assert hog_result.status is RunStatus.FAILED
    assert hog_result.failure_reason == OUT_OF_MEMORY
    assert "memory limit (64 MiB per task)" in hog_result.error
    calm_lines, calm_result = results["calm"]  # type: ignore[misc]
    assert (calm_lines, calm_result.status) == (["calm"], RunStatus.COMPLETED)
    assert observer.limits == ["memory"]


async def test_a_fork_bomb_stops_at_the_pids_limit_and_leaves_nothing(
    tmp_path: Path, contained: Containment
) -> None:
    """Forks past `pids.max` are refused; when the run ends, every fork is gone with it."""
    marker = f"bomb-{tmp_path.name}"
    code = f"""
        import os, sys, time
        n = 0
        try:
            while True:
                if os.fork() == 0:
                    os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 60; :", "{marker}"])
                n += 1
        except OSError as exc:
            print(n, exc.errno, flush=True)
    """
    observer = RecordingObserver()
    lines, _ = await _lines(_spec(code, tmp_path, contained, observer=observer))
    forks, errno_ = (int(x) for x in lines[0].split())
    assert errno_ == 11 and forks < 40  # EAGAIN at the limit
    assert "pids" in observer.limits
    assert not named(marker)


async def test_the_run_group_is_removed_and_a_crashed_runs_group_is_killed(
    tmp_path: Path, contained: Containment
) -> None:
    """No group is left after a run; a group a crashed daemon left with a process in it is
    killed and removed when the next daemon with the same key starts."""
    assert contained.cgroups is not None
    await _lines(_spec("print('x')", tmp_path, contained))
    parents = contained.cgroups.parents
    assert all(not any(p.iterdir()) or _only_files(p) for p in parents.values())
    left = contained.group("left-behind")
    assert left is not None
    ready = tmp_path / "ready"
    procs = " ".join(f"echo 0 > {f};" for f in left.procs_files())
    script = f"{procs} exec /bin/sh -c 'touch {ready}; exec sleep 60'"
    leftover = await anyio.open_process(["/bin/sh", "-c", script])
    await eventually(ready.exists, what="the leftover in its group")
    key = next(iter(parents.values())).name.removeprefix("agent-daemon-")
    again, _ = prepare(contained.limits, key)
    assert again is not None
    with anyio.fail_after(5):
        await leftover.wait()
    assert leftover.returncode == -9
    assert not any(d.exists() for d in left.dirs.values())


def _only_files(path: Path) -> bool:
    return all(not p.is_dir() for p in path.iterdir())


async def test_an_agent_user_runs_the_agent_inside_the_unit(
    tmp_path: Path, contained: Containment, agent_user: AgentUser, passable_tmp: Path
) -> None:
    """With an agent user, the namespace and cgroups are root's and the agent is the user's,
    with no supplementary group of root's."""
    code = "import os; print(os.getuid(), os.geteuid(), os.getgid(), sorted(os.getgroups()))"
    spec = _spec(code, passable_tmp, contained, user=agent_user)
    spec = dataclasses.replace(spec, argv=[agent_python(), *spec.argv[1:]])
    lines, _ = await _lines(spec)
    uid, euid, gid, *_ = lines[0].split(" ", 3)
    assert (int(uid), int(euid), int(gid)) == (agent_user.uid, agent_user.uid, agent_user.gid)
    assert "0" not in lines[0].split(" ", 3)[3].strip("[]").replace(",", " ").split()


@pytest.mark.skipif(sys.platform != "linux", reason="Linux only")
def test_the_launcher_tools_are_root_owned_system_programs() -> None:
    """unshare, setpriv and sh come from the system's directories, never from PATH."""
    tools = find_tools()
    for path in (tools.unshare, tools.setpriv, tools.shell):
        assert path.startswith(("/usr/", "/bin/", "/sbin/")), path
        assert os.stat(path).st_uid == 0


async def test_the_agent_sees_only_its_own_runs_processes(
    tmp_path: Path, contained: Containment
) -> None:
    """/proc in the run shows the launcher, the agent and what it starts: not the daemon, not
    another task (whose environment holds its token)."""
    code = "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    lines, _ = await _lines(_spec(code, tmp_path, contained))
    assert lines == ["[1, 2]"]


async def test_without_cap_sys_admin_the_agent_user_makes_the_namespace(
    tmp_path: Path, contained: Containment, agent_user: AgentUser, passable_tmp: Path
) -> None:
    """The user-namespace way (a root daemon whose capabilities leave out CAP_SYS_ADMIN):
    the agent runs as its user, second in its own pid namespace, in the run's cgroups."""
    assert contained.cgroups is not None
    in_user = Containment(
        namespace=True, user_namespace=True, cgroups=contained.cgroups, tools=contained.tools
    )
    code = "import os; print(os.geteuid(), os.getpid(), open('/proc/self/cgroup').read())"
    spec = _spec(code, passable_tmp, in_user, user=agent_user)
    spec = dataclasses.replace(spec, argv=[agent_python(), *spec.argv[1:]])
    lines, _ = await _lines(spec)
    euid, pid, *_ = lines[0].split()
    assert (int(euid), int(pid)) == (agent_user.uid, 2)
    inside = [line for line in lines if "/agent-daemon-" in line]
    assert len(inside) == len(contained.cgroups.trees), lines


async def test_a_contained_run_is_never_walked_while_it_runs(
    tmp_path: Path, contained: Containment
) -> None:
    """Nothing leaves a namespace: the half-second walk of a run's tree is not made for it,
    and its stop still leaves nothing behind."""
    walks = 0

    def counted(roots: list[ProcIdentity], agents: frozenset[int]) -> ProcessTable:
        nonlocal walks
        walks += 1
        return subtree_table(roots, agents)

    registry = ProcessRegistry(scanner=counted)
    marker = f"walked-{tmp_path.name}"
    code = f"""
        import subprocess, time
        subprocess.Popen(["/bin/sh", "-c", "sleep 60; :", "{marker}"], start_new_session=True)
        print("ready", flush=True)
        time.sleep(60)
    """
    spec = _spec(code, tmp_path, contained, processes=registry)
    with anyio.fail_after(20):
        async with run_process(spec, LinesParser()) as run:
            assert (await anext(aiter(run.messages()))).content == "ready"
            await anyio.sleep(3 * TRACK_INTERVAL)
    assert walks == 0
    assert not named(marker)
