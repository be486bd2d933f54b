"""A real root `agent-daemon run` with a pool of agent users: each running task has a uid of
its own that cannot read another's work dir, and what a task leaves behind under its uid is
killed before that uid runs anything again. Needs root (as CI has) to create the users.
"""

from __future__ import annotations

import re
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from backends.process.identity import AgentUser
from daemon.cli.tasks_api import TasksApi
from daemon.testing.processes import named
from tests.daemon_child import DaemonChild, daemon_child
from tests.fakes.system_user import AGENT_USER_CAPABILITIES, agent_python, with_only
from tests.helpers import FINAL, TOKEN, daemon_env, eventually, server_client

pytestmark = [pytest.mark.anyio, pytest.mark.root]

_EMBEDDED = re.compile(r"embedded server listening on (http://\S+)")

# A shell agent. `leave`, the first time: a sleeper that double-forks, calls setsid, moves to
# / and drops its environment (nothing ties it to the task), named `straggler-<shared dir>`
# on its command line; `zombie`, the first time: a process whose leader thread exits while a
# second thread runs on, which then reads the environment of every process its uid runs later
# (the next task's token) into `$shared/stolen`; every later time: `done`. `peek` waits until
# two agents have said where they work, then tries to list the other's work dir. The test
# looks for the leftovers from outside, by name: inside its pid namespace an agent sees
# neither another task's processes nor their pids.
AGENT = r"""#!/bin/sh
shared="$1"
me=$(id -u)
echo "uid=$me"
case "$2" in
leave|zombie)
    if [ -f "$shared/left" ]; then
        echo "done=yes"
        exit 0
    fi
    touch "$shared/left"
    if [ "$2" = leave ]; then
        ( cd / && env -i setsid sh -c 'sleep 444; :' "straggler-$shared" <&- >&- 2>&- & )
    else
        # No wait for it: an agent that leaves at once gives a /proc walk no time to see it.
        ( cd / && env -i setsid "$3" "$4" "straggler-$shared" "$shared" <&- >&- 2>&- & )
    fi
    echo "left=yes"
    ;;
hog)
    # A task whose work runs past its memory limit (the MULTICA_TASK_ID's last digit decides
    # which of two tasks): the kernel kills it in its own cgroup.
    case "$MULTICA_TASK_ID" in
    *[02468ace]) "$3" -c 'x = bytearray(512 << 20); x[::4096] = b"y" * len(x[::4096])' ;;
    *) sleep 1; echo "calm=yes" ;;
    esac
    ;;
peek)
    echo "$MULTICA_WORKDIR" > "$shared/$me.workdir"
    n=0
    while [ "$(ls "$shared" | grep -c 'workdir$')" -lt 2 ] && [ $n -lt 300 ]; do
        sleep 0.1; n=$((n+1))
    done
    for f in "$shared"/*.workdir; do
        [ "$f" = "$shared/$me.workdir" ] && continue
        if ls "$(cat "$f")" >/dev/null 2>&1; then echo "peek=allowed"; else echo "peek=refused"; fi
    done
    ;;
esac
"""

ZOMBIE = r"""
import ctypes, os, sys, threading, time
shared = sys.argv[2]
def steal():
    open(os.path.join(shared, "running"), "w").close()  # noqa: SIM115
    me, seen = os.getuid(), set()
    while True:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid in seen or int(pid) == os.getpid():
                continue
            try:
                if os.stat(f"/proc/{pid}").st_uid != me:
                    continue
                env = open(f"/proc/{pid}/environ", "rb").read()
            except OSError:
                continue
            seen.add(pid)
            if b"MULTICA_TASK_ID" in env:
                with open(os.path.join(shared, "stolen"), "ab") as out:
                    out.write(env.replace(b"\0", b"\n") + b"\n")
        time.sleep(0.02)
threading.Thread(target=steal).start()
ctypes.CDLL(None).syscall(60, 0)
"""
"""Run by the agent user's Python: its main thread exits, its second thread steals."""


@asynccontextmanager
async def pool_daemon(
    home: Path, users: str, mode: str, **more: str
) -> AsyncIterator[tuple[DaemonChild, TasksApi]]:
    """`agent-daemon run` as root (embedded server) with MULTICA_AGENT_USER=`users` and the
    shell agent in `mode` (and the settings `more`); yields the child and its task API."""
    shared = home / "shared"
    shared.mkdir(mode=0o777, exist_ok=True)
    shared.chmod(0o1777)
    agent = home / "agent.sh"
    agent.write_text(AGENT)
    agent.chmod(0o755)
    zombie = home / "zombie.py"
    zombie.write_text(ZOMBIE)
    zombie.chmod(0o644)
    env = daemon_env(
        home,
        "",
        MULTICA_AGENT_USER=users,
        MULTICA_EMBEDDED_LISTEN="127.0.0.1:0",
        MULTICA_SCRIPTED_BACKEND="0",
        MULTICA_COMMAND_PATH=str(agent),
        MULTICA_COMMAND_ARGS=f"{shared} {mode} {agent_python()} {zombie}",
        MULTICA_DAEMON_MAX_CONCURRENT_TASKS="4",
        **more,
    )
    python = (*with_only(AGENT_USER_CAPABILITIES), sys.executable)
    async with daemon_child(env, python=python) as child:
        await eventually(lambda: _EMBEDDED.search(child.log) is not None, within=15)
        url = _EMBEDDED.search(child.log).group(1)  # type: ignore[union-attr]
        async with server_client(url, TOKEN) as http:
            yield child, TasksApi(http)


async def finished(api: TasksApi, task_id: str, within: float = 60) -> dict[str, Any]:
    async def ended() -> bool:
        return (await api.get_task(task_id))["status"] in FINAL

    await eventually(ended, within=within)
    return await api.get_task(task_id)


async def said(api: TasksApi, task_id: str) -> dict[str, str]:
    """The agent's `key=value` lines, from its transcript."""
    text = "\n".join(str(m.get("content") or "") for m in await api.messages(task_id))
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


async def test_two_running_tasks_have_two_uids_and_cannot_read_each_others_work_dir(
    passable_tmp: Path, two_users: tuple[AgentUser, AgentUser]
) -> None:
    """A pool of two: two tasks at once run as the two users, each work dir is its own uid's,
    and neither agent can list the other's."""
    a, b = two_users
    async with pool_daemon(passable_tmp, f"{a.name},{b.name}", "peek") as (child, api):
        ids = [str((await api.create_task("Peek.", backend="command"))["id"]) for _ in range(2)]
        tasks = [await finished(api, task_id) for task_id in ids]
        reports = [await said(api, task_id) for task_id in ids]
    assert [t["status"] for t in tasks] == ["completed"] * 2, [t["error"] for t in tasks]
    assert sorted(int(r["uid"]) for r in reports) == sorted((a.uid, b.uid))
    assert [r["peek"] for r in reports] == ["refused", "refused"]
    # The daemon's capabilities leave out CAP_SYS_ADMIN: the agent user makes the namespace.
    assert "runs contained by pid namespace (user namespace) + cgroup v2" in child.log
    for task, report in zip(tasks, reports, strict=True):
        assert _owners(Path(task["work_dir"])) == {int(report["uid"])}


@pytest.mark.parametrize("mode", ["leave", "zombie"])
@pytest.mark.parametrize("pool", [False, True], ids=["one user", "pool of two"])
async def test_a_leftover_is_gone_before_its_uid_runs_the_next_task(
    passable_tmp: Path, two_users: tuple[AgentUser, AgentUser], mode: str, pool: bool
) -> None:
    """Task A leaves, detached in `/` with an empty environment, a double-forked sleeper or a
    process whose leader thread exited while another thread reads every new process's
    environment of its uid; by the time task B runs (the same uid, or a pool's), it is dead
    and has read nothing of B."""
    a, b = two_users
    shared = passable_tmp / "shared"
    marker = f"straggler-{shared}"
    users = f"{a.name},{b.name}" if pool else a.name
    async with pool_daemon(passable_tmp, users, mode) as (_, api):
        first = str((await api.create_task("Leave one.", backend="command"))["id"])
        left = await finished(api, first)
        assert (await said(api, first)).get("left") == "yes", await said(api, first)
        second = str((await api.create_task("Check.", backend="command"))["id"])
        checked = await finished(api, second)
        report = await said(api, second)
    assert (left["status"], checked["status"]) == ("completed", "completed")
    assert report.get("done") == "yes", report
    assert not named(marker)
    stolen = shared / "stolen"
    assert not stolen.exists() or second not in stolen.read_text(), stolen.read_text()


def _owners(work_dir: Path) -> set[int]:
    """Who owns the work dir and its task's directory."""
    return {work_dir.stat().st_uid, work_dir.parent.stat().st_uid}


def _zombie(pid: int) -> bool:
    """Gone, or a zombie waiting to be reaped (it runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
    except OSError:
        return True


async def test_a_task_past_its_memory_limit_fails_by_name_and_harms_no_other(
    passable_tmp: Path, two_users: tuple[AgentUser, AgentUser]
) -> None:
    """With MULTICA_AGENT_MEMORY_MAX, a task that allocates past it fails
    `agent_error.out_of_memory` with the limit in its error; the task beside it completes and
    the daemon goes on to the next."""
    a, b = two_users
    limited = {"MULTICA_AGENT_MEMORY_MAX": "64M"}
    async with pool_daemon(passable_tmp, f"{a.name},{b.name}", "hog", **limited) as (child, api):
        ids: dict[str, str] = {}
        while len(ids) < 2:  # one task of each kind, by the last digit of its id
            task_id = str((await api.create_task("Work.", backend="command"))["id"])
            kind = "hog" if task_id[-1] in "02468ace" else "calm"
            ids.setdefault(kind, task_id)
        hog, calm = [await finished(api, ids[kind]) for kind in ("hog", "calm")]
        assert child.process.returncode is None
    assert hog["status"] == "failed"
    assert hog["failure_reason"] == "agent_error.out_of_memory", hog
    assert "memory limit (64 MiB per task)" in hog["error"]
    assert calm["status"] == "completed", calm["error"]
