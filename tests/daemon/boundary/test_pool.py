"""The agent-user pool: parsing MULTICA_AGENT_USER, one user per task, and the sweep that kills
every process of a uid before it is handed out again (real users and processes; needs root)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from backends.process.identity import AgentUser
from daemon.boundary.pool import AgentPool, processes_of, resolve_pool
from daemon.config import Settings
from daemon.errors import ConfigError
from tests.fakes.system_user import agent_python
from tests.helpers import eventually

pytestmark = pytest.mark.root


def leave_behind(user: AgentUser) -> int:
    """Start, as `user`, a sleeper that double-forks, calls setsid, leaves for `/` with an
    empty environment and outlives its parent, as an agent's tool can; its pid."""
    script = "( cd / && env -i setsid sleep 444 </dev/null >/dev/null 2>&1 & echo $! )"
    done = subprocess.run(
        ["sh", "-c", script], check=True, capture_output=True, cwd="/", **user.spawn_options()
    )
    return int(done.stdout)


def test_a_pool_is_a_list_or_a_uid_range(two_users: tuple[AgentUser, AgentUser]) -> None:
    """`a,b` and `LOW-HIGH` name pools; a single name is a pool of one; an unknown or doubled
    user, or a backwards range, stops start-up naming the variable."""
    a, b = two_users
    assert [u.uid for u in resolve_pool(f"{a.name},{b.name}")] == [a.uid, b.uid]
    assert [u.uid for u in resolve_pool(f" {a.uid} , {b.name} ")] == [a.uid, b.uid]
    assert [u.uid for u in resolve_pool(a.name)] == [a.uid]
    low, high = sorted((a.uid, b.uid))
    if high == low + 1:
        assert [u.uid for u in resolve_pool(f"{low}-{high}")] == [low, high]
    for bad in (f"{a.name},{a.name}", f"{a.name},no-such-user-x", f"{high}-{low}", "root,x"):
        with pytest.raises(ConfigError, match="MULTICA_AGENT_USER"):
            resolve_pool(bad)


def test_a_pool_bounds_how_many_tasks_run_at_once(
    tmp_path: Path, two_users: tuple[AgentUser, AgentUser]
) -> None:
    """Twenty slots asked, two users: two tasks at once; one user keeps the twenty."""
    a, b = two_users
    env = {"HOME": str(tmp_path), "MULTICA_DAEMON_MAX_CONCURRENT_TASKS": "20"}
    pooled = Settings.from_env({**env, "MULTICA_AGENT_USER": f"{a.name},{b.name}"})
    single = Settings.from_env({**env, "MULTICA_AGENT_USER": a.name})
    assert (pooled.max_concurrent_tasks, [u.uid for u in pooled.agent_pool]) == (2, [a.uid, b.uid])
    assert pooled.agent_identity == pooled.agent_pool[0]
    assert single.max_concurrent_tasks == 20


@pytest.mark.anyio
async def test_each_running_task_gets_a_user_of_its_own(
    two_users: tuple[AgentUser, AgentUser],
) -> None:
    """Two holders get two users; a third waits until one is released and swept."""
    swept: list[int] = []
    pool = AgentPool(two_users, clean=lambda uid: swept.append(uid) or 0)
    first, second = await pool.acquire(), await pool.acquire()
    assert first is not None and second is not None and first.uid != second.uid
    third: list[AgentUser | None] = []

    async def wait_for_one() -> None:
        third.append(await pool.acquire())

    async with anyio.create_task_group() as tg:
        tg.start_soon(wait_for_one)
        await anyio.wait_all_tasks_blocked()
        assert third == []
        await pool.release(second)
    assert swept == [second.uid] and third == [second]


@pytest.mark.anyio
async def test_a_leftover_of_a_tasks_uid_is_gone_before_the_uid_is_handed_out_again(
    two_users: tuple[AgentUser, AgentUser],
) -> None:
    """A double-forked, setsid'd sleeper of the first task's user is killed by its release:
    when the pool hands that uid out again, no process of it is left."""
    pool = AgentPool(two_users[:1])
    user = await pool.acquire()
    assert user is not None
    leftover = leave_behind(user)
    assert leftover in processes_of(user.uid)
    await pool.release(user)
    again = await pool.acquire()
    assert again == user
    assert processes_of(user.uid) == []
    await eventually(lambda: not Path(f"/proc/{leftover}").exists() or _zombie(leftover))


@pytest.mark.anyio
async def test_a_shared_user_is_swept_only_when_no_task_of_it_runs(
    two_users: tuple[AgentUser, AgentUser],
) -> None:
    """One user for every task: releasing one of two holders kills nothing; the last does."""
    pool = AgentPool(two_users[:1])
    one, other = await pool.acquire(), await pool.acquire()
    assert one is not None and one == other
    leftover = leave_behind(one)
    await pool.release(one)
    assert leftover in processes_of(one.uid)
    await pool.release(other)
    assert processes_of(one.uid) == []


def leave_zombie_leader(user: AgentUser, started: Path) -> subprocess.Popen[bytes]:
    """Start, as `user`, a detached process whose leader thread exits while a second thread
    runs on (its /proc state reads `Z`); returned once the second thread runs."""
    code = (
        "import ctypes, sys, threading, time\n"
        "def spin():\n"
        "    open(sys.argv[1], 'w').close()\n"
        "    while True: time.sleep(0.05)\n"
        "threading.Thread(target=spin).start()\n"
        "ctypes.CDLL(None).syscall(60, 0)\n"
    )
    proc = subprocess.Popen(
        [agent_python(), "-c", code, str(started)],
        cwd="/",
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        **user.spawn_options(),
    )
    deadline = time.monotonic() + 10
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert started.exists()
    return proc


@pytest.mark.anyio
async def test_a_process_whose_leader_thread_exited_is_swept_before_the_uid_is_reused(
    two_users: tuple[AgentUser, AgentUser], passable_tmp: Path
) -> None:
    """A leftover whose leader is a zombie while another thread runs is found and killed by
    the release: the next task of that uid finds nothing of it."""
    pool = AgentPool(two_users[:1])
    user = await pool.acquire()
    assert user is not None
    os.chmod(passable_tmp, 0o777)
    leftover = leave_zombie_leader(user, passable_tmp / "started")
    try:
        # The second thread runs first; the leader's exit follows it.
        await eventually(lambda: _zombie(leftover.pid), what="the leader thread gone")
        assert leftover.pid in processes_of(user.uid)
        await pool.release(user)
        assert await pool.acquire() == user
        assert processes_of(user.uid) == []
    finally:
        leftover.kill()
        assert leftover.wait(timeout=5) == -9


@pytest.mark.anyio
async def test_a_uid_whose_processes_outlive_the_sweep_is_held_back_until_clean() -> None:
    """While something of a uid survives its sweep, no task gets that uid and the pool says
    why; once a later sweep finds it clean, the uid is handed out again."""
    user = AgentUser("agent-x", 61001, 61001, (61001,), "/nonexistent")
    alive = [[4242], []]
    pool = AgentPool([user], clean=lambda uid: 0, alive=lambda uid: alive.pop(0), retry_every=0.05)
    assert await pool.acquire() == user
    await pool.release(user)
    assert pool.held_back() == ("agent-x (uid 61001): 1 process(es) outlived the sweep",)
    with anyio.fail_after(5):
        assert await pool.acquire() == user
    assert pool.held_back() == ()
    assert alive == []


def _zombie(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def test_the_tests_run_as_root() -> None:
    """These tests create users and processes as them: without root they prove nothing."""
    assert os.geteuid() == 0
