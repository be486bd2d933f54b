"""The containment the daemon's runs get on this host, decided once at start-up.

Each run is a kernel unit where the kernel lets the daemon make one (backends/process/unit.py):
its own pid namespace (root, or a user namespace of the daemon's own) and, where a cgroup tree
is writable below the daemon's own group, its own cgroups with the per-task limits of
`MULTICA_AGENT_MEMORY_MAX`, `MULTICA_AGENT_PIDS_MAX` and `MULTICA_AGENT_CPU_WEIGHT`. Where
neither can be made (an unprivileged container) it says so once, and a run's tree is found by
walking /proc as before, with the agent pool's uid sweep as the last word
(daemon/boundary/pool.py). The start-up line, `/health` and `status` name what is in force.
"""

from __future__ import annotations

import hashlib
import logging
import os

from backends.process.cgroups import Limits, prepare
from backends.process.linux import IS_LINUX
from backends.process.unit import Containment, find_tools, probe_namespace
from daemon.config import Settings

log = logging.getLogger(__name__)


def limits_of(settings: Settings) -> Limits:
    """The per-task limits the settings ask for."""
    return Limits(
        memory_bytes=settings.agent_memory_max,
        pids=settings.agent_pids_max,
        cpu_weight=settings.agent_cpu_weight,
    )


def contain(settings: Settings, *, own_process: bool) -> Containment:
    """What this host lets the daemon make of each run; logged once. `own_process`: the
    daemon owns its process (`agent-daemon run`), so it may move itself into a leaf of its
    own cgroup v2 group to hand controllers to its runs; a worker embedded in another
    process never moves it."""
    if not IS_LINUX:
        found = Containment(missing="not Linux")
        log.warning("containment: %s (%s)", found.name, found.missing)
        return found
    tools = find_tools()
    if settings.agent_pid_namespace:
        mode, why_not = probe_namespace(tools, os.geteuid() == 0, settings.agent_identity)
    else:
        mode, why_not = "", "MULTICA_AGENT_PID_NAMESPACE=0"
    limits = limits_of(settings)
    home, no_cgroup = prepare(limits, _key(settings), may_move_self=own_process)
    found = Containment(
        namespace=bool(mode),
        user_namespace=mode == "user",
        cgroups=home,
        tools=tools,
        missing="; ".join(w for w in (why_not, no_cgroup) if w),
    )
    unenforced = _unenforced(found, limits)
    log.info(
        "containment: %s%s%s",
        found.name,
        f"; per task {_describe(limits, home.limited)}" if home is not None else "",
        f" (none: {found.missing})" if found.missing else "",
    )
    if unenforced:
        log.warning("containment: %s not enforced here (no writable cgroup for it)", unenforced)
    return found


def _key(settings: Settings) -> str:
    """This daemon's name among the cgroups: the same for its state directory after a
    restart (one daemon per state directory), so a crashed run's groups are found again."""
    where = str(settings.state_dir.expanduser().resolve())
    return hashlib.sha256(where.encode()).hexdigest()[:12]


def _describe(limits: Limits, enforced: frozenset[str]) -> str:
    parts = []
    if "memory" in enforced:
        parts.append(f"memory {limits.memory_bytes // (1024 * 1024)} MiB")
    if "pids" in enforced:
        parts.append(f"{limits.pids} pids")
    if "cpu" in enforced:
        parts.append(f"cpu weight {limits.cpu_weight}")
    return ", ".join(parts) or "no limits"


def _unenforced(found: Containment, limits: Limits) -> str:
    """The limits asked for that no tree here enforces, named by their variables."""
    enforced = found.cgroups.limited if found.cgroups is not None else frozenset()
    asked = {
        "memory": ("MULTICA_AGENT_MEMORY_MAX", limits.memory_bytes),
        "pids": ("MULTICA_AGENT_PIDS_MAX", limits.pids),
    }
    return ", ".join(var for kind, (var, value) in asked.items() if value and kind not in enforced)
