"""The cgroup trees mounted here and the daemon's own group in each: where its runs' groups
can go (cgroups.py makes them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

V2 = "unified"
"""The name a cgroup v2 tree goes by below, beside the v1 controllers' names."""
WANTED_V1 = ("pids", "memory", "cpu")
_PROC_SELF = Path("/proc/self")


@dataclass(frozen=True, slots=True)
class Tree:
    """One mounted cgroup tree and the daemon's own group in it."""

    name: str
    """`unified` for v2, else the v1 controller (`pids`, `memory`, `cpu`)."""
    own: Path
    """The directory of the group the daemon runs in."""

    @property
    def v2(self) -> bool:
        """Whether this is the unified (v2) tree."""
        return self.name == V2


def own_groups(proc_self: Path = _PROC_SELF) -> dict[str, Path]:
    """The directory of the daemon's own group in each mounted tree it could use, by tree name
    (`unified`, `pids`, `memory`, `cpu`), read from /proc/self/{cgroup,mountinfo}."""
    try:
        membership = (proc_self / "cgroup").read_text()
        mounts = (proc_self / "mountinfo").read_text()
    except OSError:
        return {}
    paths: dict[str, str] = {}
    for line in membership.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and not controllers:
            paths[V2] = path
        for name in controllers.split(","):
            if name in WANTED_V1:
                paths[name] = path
    found: dict[str, Path] = {}
    for line in mounts.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        after = line.split(" - ", 1)[1].split()
        if len(after) < 3:
            continue
        fstype, options = after[0], after[2].split(",")
        root, point = fields[3], fields[4]
        if fstype == "cgroup2":
            names = [V2]
        elif fstype == "cgroup":
            names = [o for o in options if o in WANTED_V1]
        else:
            continue
        for name in names:
            mine = paths.get(name)
            if mine is None or name in found:
                continue
            relative = _below(mine, root)
            if relative is not None:
                found[name] = Path(point, relative)
    return found


def _below(path: str, root: str) -> str | None:
    """`path` relative to a mount's `root`, or None when the mount does not show it."""
    if root == "/":
        return path.lstrip("/")
    if path == root:
        return ""
    if path.startswith(root.rstrip("/") + "/"):
        return path[len(root.rstrip("/")) + 1 :]
    return None
