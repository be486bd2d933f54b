"""Per-run control groups: where the daemon may make them, their limits, their kill and their
counters.

A run's cgroup holds every process of the run however it detaches (only root or the owner of
another cgroup can move a process out, and the agent is neither), so it is killed as a unit
(`cgroup.kill` on cgroup v2) and its limits bind the whole tree: memory (the kernel's OOM
killer acts inside it, never on the daemon), the number of tasks (a fork bomb stops at
`pids.max`) and a CPU weight among the runs.

Hosts differ. On a pure cgroup v2 host (systemd's `Delegate=yes`) one tree does everything. On
a hybrid host the v2 tree is mounted beside the v1 controllers and usually has none of them:
the v2 tree then gives the kill and the "populated" count, and v1's `pids`, `memory` and `cpu`
the limits. Every group is made below the group the daemon runs in, in each tree — never
anywhere else, and nothing is ever moved out of it. A tree the daemon cannot write (a
container's read-only cgroupfs, an unprivileged daemon without delegation) is left out; with
none left, there are no cgroups and the pid namespace (or the uid sweep) carries the kill.

The agent joins its groups itself, before it execs the agent (the launcher in `unit.py`
writes `0`, "this process", into each `cgroup.procs`), so no fork of the agent can happen
outside them: the daemon has no hook between fork and exec to do it for the child.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from backends.process.cgroup_trees import V2, Tree, own_groups
from backends.process.run_group import RunGroup

__all__ = ["V2", "CgroupHome", "Limits", "RunGroup", "Tree", "own_groups", "prepare"]

log = logging.getLogger(__name__)

_V2_CONTROLLERS = ("memory", "pids", "cpu")
_KEEP_LEAF = "daemon"
"""On cgroup v2, the leaf the daemon moves itself into so that its group may hand controllers
to its children (v2 lets a group with processes of its own enable none)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What each run may use at most; 0 = no limit of that kind."""

    memory_bytes: int = 0
    pids: int = 0
    cpu_weight: int = 0
    """1-10000, cgroup v2's scale (100 = an equal share); v1's `cpu.shares` gets it x10.24."""


@dataclass
class CgroupHome:
    """The daemon's parent group in every usable tree, where each run's group is made."""

    trees: tuple[Tree, ...]
    parents: dict[str, Path]
    limits: Limits
    limited: frozenset[str] = field(default_factory=frozenset)
    """Which limits some tree enforces: `memory`, `pids`, `cpu`."""
    _made: int = 0

    @property
    def _v2_enabled(self) -> frozenset[str]:
        """The controllers the v2 parent hands to each run's group."""
        parent = self.parents.get(V2)
        return frozenset(_v2_enabled(parent)) if parent is not None else frozenset()

    def describe(self) -> str:
        """`cgroup v2 (kill) + v1 pids, memory` and the like, for the start-up line."""
        parts = []
        v2 = [t for t in self.trees if t.v2]
        if v2:
            ctl = sorted(self.limited & set(_v2_enabled(self.parents[V2])))
            parts.append(f"cgroup v2 ({', '.join(['kill', *ctl])})")
        v1 = [t.name for t in self.trees if not t.v2]
        if v1:
            parts.append(f"cgroup v1 {', '.join(v1)}")
        return " + ".join(parts)

    def group(self, label: str) -> RunGroup:
        """A fresh group for one run in every tree, with the limits written: the caller must
        `remove()` it."""
        self._made += 1
        name = f"{_safe(label)}-{os.getpid()}-{self._made}"
        dirs: dict[str, Path] = {}
        try:
            for tree in self.trees:
                path = self.parents[tree.name] / name
                path.mkdir(mode=0o755)
                dirs[tree.name] = path
                _write_limits(tree, path, self.limits, self._v2_enabled)
        except OSError:
            RunGroup(dirs).remove()
            raise
        return RunGroup(dirs)

    def close(self) -> None:
        """Remove the daemon's parent groups (they are empty once every run is over)."""
        for path in self.parents.values():
            with contextlib.suppress(OSError):
                path.rmdir()


def prepare(
    limits: Limits,
    key: str,
    groups: dict[str, Path] | None = None,
    *,
    may_move_self: bool = False,
) -> tuple[CgroupHome | None, str]:
    """The daemon's cgroup home, made below its own group in each tree it may write (None
    where there is none), and a sentence saying why when there is none. `key` names this
    daemon's parent group (the same key after a restart: what a crashed run left is killed).
    `may_move_self`: the daemon may move its own process into a leaf below its v2 group, so
    that group can hand controllers down (only a process the daemon owns)."""
    found = own_groups() if groups is None else groups
    if not found:
        return None, "no cgroup tree is mounted here"
    trees: list[Tree] = []
    parents: dict[str, Path] = {}
    refused: list[str] = []
    # The v2 tree first: its `cgroup.kill` takes a crashed run's group at once, where a v1
    # kill, one process at a time, could let a parent run on as its children die.
    for name, own in sorted(found.items(), key=lambda item: (item[0] != V2, item[0])):
        tree = Tree(name, own)
        parent = _make_parent(tree, key, limits, may_move_self)
        if parent is None:
            refused.append(name)
            continue
        trees.append(tree)
        parents[name] = parent
    if not trees:
        return None, f"the daemon's cgroups are not writable ({', '.join(refused)})"
    limited = _enforced(trees, parents, limits)
    return CgroupHome(tuple(trees), parents, limits, limited), ""


def _make_parent(tree: Tree, key: str, limits: Limits, may_move_self: bool) -> Path | None:
    """This daemon's parent group in one tree, emptied of a crashed run's groups."""
    parent = tree.own / f"agent-daemon-{key}"
    try:
        if tree.v2 and may_move_self and _wants_v2_controllers(tree.own, limits):
            _delegate_v2(tree.own)
        parent.mkdir(mode=0o755, exist_ok=True)
        if tree.v2:
            _enable_v2(parent, limits)
        probe = parent / ".probe"
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        log.debug("cgroup tree %s not usable at %s: %s", tree.name, tree.own, exc)
        return None
    for left in _children(parent):
        log.warning("cgroup %s: a previous run's group, killed and removed", left.name)
        _remove_killed(RunGroup({tree.name: left}))
    return parent


def _wants_v2_controllers(own: Path, limits: Limits) -> bool:
    wanted = _needed_controllers(limits)
    return bool(wanted & set(_v2_available(own)))


def _delegate_v2(own: Path) -> None:
    """Let the daemon's v2 group hand controllers down: move the daemon (alone in it, at
    start) into a leaf of its own below it, then enable the controllers there."""
    wanted = [c for c in _v2_available(own) if c in _V2_CONTROLLERS]
    enabled = _v2_enabled(own)
    if all(c in enabled for c in wanted):
        return
    leaf = own / _KEEP_LEAF
    leaf.mkdir(mode=0o755, exist_ok=True)
    (leaf / "cgroup.procs").write_text("0")
    (own / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))


def _enable_v2(parent: Path, limits: Limits) -> None:
    wanted = [c for c in _v2_available(parent) if c in _needed_controllers(limits)]
    if wanted:
        (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))


def _needed_controllers(limits: Limits) -> set[str]:
    needed = set()
    if limits.memory_bytes:
        needed.add("memory")
    if limits.pids:
        needed.add("pids")
    if limits.cpu_weight:
        needed.add("cpu")
    return needed


def _v2_available(path: Path) -> list[str]:
    try:
        return (path / "cgroup.controllers").read_text().split()
    except OSError:
        return []


def _v2_enabled(path: Path) -> list[str]:
    try:
        # The kernel lists them bare; a "+" is what was written (a tree of plain files).
        return [c.lstrip("+") for c in (path / "cgroup.subtree_control").read_text().split()]
    except OSError:
        return []


def _enforced(trees: Iterable[Tree], parents: dict[str, Path], limits: Limits) -> frozenset[str]:
    """Which of the limits asked for some tree enforces."""
    have: set[str] = set()
    for tree in trees:
        if tree.v2:
            have |= set(_v2_enabled(parents[tree.name])) & set(_V2_CONTROLLERS)
        else:
            have.add(tree.name)
    return frozenset(have & _needed_controllers(limits))


def _write_limits(tree: Tree, path: Path, limits: Limits, v2_enabled: frozenset[str]) -> None:
    """Write the limits this tree enforces into one run's group (on v2, those of the
    controllers its parent hands down: `v2_enabled`)."""
    if tree.v2:
        writes = {
            "memory": [("memory.max", limits.memory_bytes), ("memory.swap.max", 0)],
            "pids": [("pids.max", limits.pids)],
            "cpu": [("cpu.weight", limits.cpu_weight)],
        }
        for controller, files in writes.items():
            if controller in v2_enabled and controller in _needed_controllers(limits):
                for name, value in files:
                    _write_optional(path / name, value, required=name != "memory.swap.max")
        return
    if tree.name == "memory" and limits.memory_bytes:
        _write_optional(path / "memory.limit_in_bytes", limits.memory_bytes)
        # With swap accounting on, the same bound on memory and swap together.
        _write_optional(path / "memory.memsw.limit_in_bytes", limits.memory_bytes, required=False)
    elif tree.name == "pids" and limits.pids:
        _write_optional(path / "pids.max", limits.pids)
    elif tree.name == "cpu" and limits.cpu_weight:
        _write_optional(path / "cpu.shares", max(2, limits.cpu_weight * 1024 // 100))


def _write_optional(path: Path, value: int, required: bool = True) -> None:
    try:
        path.write_text(str(value))
    except OSError as exc:
        if required or exc.errno not in (errno.ENOENT, errno.EINVAL, errno.EACCES):
            raise


def _children(parent: Path) -> list[Path]:
    with contextlib.suppress(OSError):
        return [p for p in parent.iterdir() if p.is_dir()]
    return []


def _remove_killed(group: RunGroup, within: float = 2.0) -> None:
    """Kill a left-over group and remove it once the kernel has taken its processes."""
    ends = time.monotonic() + within
    while True:
        group.kill()
        if group.empty() and group.remove():
            return
        if time.monotonic() > ends:
            log.warning("cgroup %s: still busy, left in place", list(group.dirs.values()))
            return
        time.sleep(0.005)


def _safe(label: str) -> str:
    """A group name from a task id: letters, digits, dashes, at most 40."""
    text = "".join(c if c.isalnum() or c == "-" else "-" for c in label)[:40]
    return text or "run"
