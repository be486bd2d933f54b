"""Where the daemon makes its runs' cgroups and what it writes there, on a cgroup tree laid
out in plain directories (the host's own trees: test_unit.py, as root)."""

from __future__ import annotations

from pathlib import Path

from backends.process.cgroups import V2, Limits, own_groups, prepare

HYBRID_CGROUP = """\
9:name=systemd:/
8:pids:/
4:memory:/process_api/abc
1:cpu,cpuacct:/
0::/
"""
HYBRID_MOUNTINFO = """\
30 25 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
33 30 0:29 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
34 30 0:30 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
"""
CONTAINER_MOUNTINFO = """\
40 30 0:40 /kubepods/pod1 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup2 rw
"""


def test_the_daemons_own_group_in_each_tree_of_a_hybrid_host(tmp_path: Path) -> None:
    """cgroup v2 and the v1 pids, memory and cpu controllers, each at the daemon's own group;
    a controller mounted with another (cpu,cpuacct) is found by its name."""
    (tmp_path / "cgroup").write_text(HYBRID_CGROUP)
    (tmp_path / "mountinfo").write_text(HYBRID_MOUNTINFO)
    assert own_groups(tmp_path) == {
        V2: Path("/sys/fs/cgroup/unified"),
        "pids": Path("/sys/fs/cgroup/pids"),
        "memory": Path("/sys/fs/cgroup/memory/process_api/abc"),
        "cpu": Path("/sys/fs/cgroup/cpu,cpuacct"),
    }


def test_a_group_outside_what_the_mount_shows_is_left_out(tmp_path: Path) -> None:
    """A container whose cgroup2 mount shows only its own subtree: a group path outside it
    (another namespace's view) names no directory here."""
    (tmp_path / "cgroup").write_text("0::/elsewhere\n")
    (tmp_path / "mountinfo").write_text(CONTAINER_MOUNTINFO)
    assert own_groups(tmp_path) == {}
    (tmp_path / "cgroup").write_text("0::/kubepods/pod1/app\n")
    assert own_groups(tmp_path) == {V2: Path("/sys/fs/cgroup/app")}


def _v2_tree(root: Path, controllers: str) -> Path:
    """A v2 group directory as the kernel shows it: its controllers, none handed down."""
    own = root / "service"
    own.mkdir()
    (own / "cgroup.controllers").write_text(controllers)
    (own / "cgroup.subtree_control").write_text("")
    (own / "cgroup.procs").write_text("1234\n")
    (own / "cgroup.kill").write_text("")
    return own


def test_a_delegated_v2_group_hands_its_controllers_down_with_the_daemon_in_a_leaf(
    tmp_path: Path,
) -> None:
    """A daemon that owns its process moves itself into `daemon/` below its group, enables
    memory, pids and cpu there and in its parent group, and writes each run's limits."""
    own = _v2_tree(tmp_path, "cpuset cpu io memory pids")
    parent = own / "agent-daemon-k"
    parent.mkdir()
    # What the kernel shows below a group once it hands memory, pids and cpu on.
    (parent / "cgroup.controllers").write_text("cpu memory pids")
    limits = Limits(memory_bytes=1 << 30, pids=100, cpu_weight=50)
    home, why = prepare(limits, "k", {V2: own}, may_move_self=True)
    assert home is not None, why
    assert (own / "daemon" / "cgroup.procs").read_text() == "0"
    assert (own / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert (parent / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    assert home.limited == {"memory", "pids", "cpu"}
    assert home.describe() == "cgroup v2 (kill, cpu, memory, pids)"
    group = home.group("task-1")
    run = group.dirs[V2]
    assert run.parent == parent
    assert (run / "memory.max").read_text() == str(1 << 30)
    assert (run / "memory.swap.max").read_text() == "0"
    assert (run / "pids.max").read_text() == "100"
    assert (run / "cpu.weight").read_text() == "50"
    assert group.procs_files() == [str(run / "cgroup.procs")]


def test_an_embedded_worker_never_moves_the_process_it_lives_in(tmp_path: Path) -> None:
    """Without `may_move_self` nothing is moved and no controller is enabled in the daemon's
    own group: its runs get the kill, not the limits, from this tree."""
    own = _v2_tree(tmp_path, "memory pids")
    home, _ = prepare(Limits(memory_bytes=1 << 30, pids=100), "k", {V2: own})
    assert home is not None
    assert not (own / "daemon").exists()
    assert (own / "cgroup.subtree_control").read_text() == ""
    assert home.limited == frozenset()
    assert home.describe() == "cgroup v2 (kill)"


def test_a_tree_the_daemon_cannot_write_is_left_out_and_said(tmp_path: Path) -> None:
    """No writable tree: no cgroups, and the reason names the trees refused."""
    missing = tmp_path / "not-there"
    home, why = prepare(Limits(pids=10), "k", {"pids": missing})
    assert home is None
    assert why == "the daemon's cgroups are not writable (pids)"
