"""A run as one kernel unit: its own pid namespace and, where the host lets the daemon, its own
cgroups with per-run limits.

In its own pid namespace every process of a run descends from the namespace's first process,
whatever it does — double forks, `setsid`, a leader thread that exits while another runs on
(`/proc/PID/status` then reads `Z` and a walk of /proc by state passes it by): an orphan is
re-parented to that first process, never out of the namespace. When the first process goes,
the kernel kills everything else in the namespace and lets it go only once all of it is gone.

How a run starts, contained (`Containment.wrap`), as root with CAP_SYS_ADMIN:

    sh -c JOIN agent-join N PROCS... unshare --pid --fork --kill-child --mount --mount-proc --
        sh -c LAUNCHER agent-init [setpriv --reuid U --regid G ... --] AGENT...

and otherwise — a root daemon whose capabilities leave out CAP_SYS_ADMIN (as the systemd
unit's do), or a daemon without root — in a user namespace the agent's own user makes:

    sh -c JOIN agent-join N PROCS... [setpriv --reuid U ... --]
        unshare --user --map-current-user --pid --fork --kill-child --mount --mount-proc --
        sh -c LAUNCHER agent-init AGENT...

* `JOIN` writes the process into each of the run's cgroups (`0`: "this process") and execs
  the rest, so nothing of the agent exists outside them: the daemon has no hook between fork
  and exec to put the child there itself. It runs first, with the daemon's identity, which
  the cgroups' files admit.
* `unshare` (util-linux, on every Linux) makes the namespace and forks its first process; it
  stays outside as the run's leader (the same pid as JOIN's), ignores SIGTERM, passes on the
  first process's exit status, and `--kill-child` has the kernel SIGKILL that first process
  when the leader dies, so a SIGKILL to the leader takes the whole namespace with it. In a
  user namespace the agent keeps its uid (`--map-current-user`) and no capability outside it.
  The namespace gets a /proc of its own (`--mount --mount-proc`, in a mount namespace of its
  own): the agent sees its run's processes only — not another task's environment, where its
  token is, nor another task's command line.
* The first process is `/bin/sh` running `LAUNCHER`: it starts the agent, waits for it,
  reaping every orphan meanwhile, and exits with the agent's status — and the namespace goes
  with it. A namespace's first process gets no signal from outside that it has no handler for
  (SIGKILL aside), so the agent, not the launcher, gets the SIGTERM of a graceful stop; a
  status of 128+N is the agent killed by signal N (`returncode_of`).
* A root daemon with an agent user switches to it in `setpriv`; every program before the
  agent is root's and comes from a fixed system directory, never from the agent's PATH.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.cli_trust import refusal
from backends.process.cgroups import CgroupHome, Limits, RunGroup
from backends.process.identity import AgentUser

log = logging.getLogger(__name__)

OUT_OF_MEMORY = "agent_error.out_of_memory"
"""The failure reason of a run its memory limit stopped (outside Multica's taxonomy: the
server keeps it as sent, and the error text names the limit)."""
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
_PID_NAMESPACE = ("--pid", "--fork", "--kill-child", "--mount", "--mount-proc", "--")
"""A pid namespace with a /proc of its own (in a mount namespace of its own): the agent sees
its own run's processes, never another task's environment or command line, nor the daemon."""
"""Where the launcher's programs are looked up: root's directories, never the agent's PATH."""
PROBE_TIMEOUT = 5.0

# Standard input goes to the agent through fd 3: a background job's stdin is /dev/null
# otherwise. The launcher keeps none of the run's pipes once the agent runs, so the daemon sees
# end-of-file when the agent's side closes them.
LAUNCHER = 'exec 3<&0; "$@" <&3 3<&- & c=$!; exec 0<&- 1>&- 2>&- 3<&-; wait "$c"; exit $?'
"""The namespace's first process."""
# $1: how many cgroup.procs files follow; then the files; then the command to exec.
JOIN_THEN_EXEC = (
    'n=$1; shift; while [ "$n" -gt 0 ]; do echo 0 > "$1" || exit 125; shift; n=$((n-1)); done; '
    'exec "$@"'
)
"""Join the run's cgroups, then exec the rest; exits 125 when it cannot join one."""


@dataclass(frozen=True, slots=True)
class Tools:
    """The system programs a contained start runs, each resolved once, root's own."""

    unshare: str = ""
    setpriv: str = ""
    shell: str = "/bin/sh"


@dataclass
class Containment:
    """What makes each run a unit on this host: found once at start-up, shared by every run."""

    namespace: bool = False
    """Each run in a pid namespace of its own."""
    user_namespace: bool = False
    """…made inside a user namespace (a daemon without root)."""
    cgroups: CgroupHome | None = None
    tools: Tools = field(default_factory=Tools)
    missing: str = ""
    """Why there is no namespace or no cgroup here, when so (said once, at start-up)."""

    @property
    def name(self) -> str:
        """The containment in force, in a few words (start-up line, `/health`, `status`)."""
        parts = []
        if self.namespace:
            parts.append("pid namespace" + (" (user namespace)" if self.user_namespace else ""))
        if self.cgroups is not None:
            parts.append(self.cgroups.describe())
        return " + ".join(parts) if parts else "uid sweep"

    @property
    def limits(self) -> Limits:
        """The per-run limits a cgroup enforces here (none without cgroups)."""
        return self.cgroups.limits if self.cgroups is not None else Limits()

    def group(self, label: str) -> RunGroup | None:
        """A fresh cgroup for one run (None without cgroups, or when one cannot be made)."""
        if self.cgroups is None:
            return None
        try:
            return self.cgroups.group(label)
        except OSError as exc:
            log.warning("run %s: no cgroup of its own (%s)", label, exc)
            return None

    def wrap(
        self, argv: Sequence[str], user: AgentUser | None, group: RunGroup | None
    ) -> tuple[list[str], dict[str, Any]]:
        """The command line that starts `argv` as a unit, and the spawn options it needs
        (the user switch, when it stays with the spawn)."""
        procs = group.procs_files() if group is not None else []
        if not self.namespace and not procs:
            return list(argv), user.spawn_options() if user is not None else {}
        switch: dict[str, Any] = {}
        to_user: list[str] = []
        if user is not None:
            if self.tools.setpriv and os.geteuid() == 0:
                to_user = _setpriv(self.tools.setpriv, user)
            else:
                switch = user.spawn_options()
        launch = [self.tools.shell, "-c", LAUNCHER, "agent-init"]
        command = [*to_user, *argv]
        if self.namespace and self.user_namespace:
            unshare = [self.tools.unshare, "--user", "--map-current-user", *_PID_NAMESPACE]
            command = [*to_user, *unshare, *launch, *argv]
        elif self.namespace:
            command = [self.tools.unshare, *_PID_NAMESPACE, *launch, *command]
        if procs:
            command = [
                self.tools.shell,
                "-c",
                JOIN_THEN_EXEC,
                "agent-join",
                str(len(procs)),
                *procs,
                *command,
            ]
        return command, switch

    def close(self) -> None:
        """Remove the daemon's cgroup home (at shutdown, every run over)."""
        if self.cgroups is not None:
            self.cgroups.close()


def returncode_of(code: int | None, contained: bool) -> int | None:
    """A contained run's exit status as the agent's own: the launcher exits 128+N for an agent
    killed by signal N, which a plain spawn reports as -N."""
    if code is not None and contained and 128 < code < 128 + 65:
        return -(code - 128)
    return code


def _setpriv(setpriv: str, user: AgentUser) -> list[str]:
    groups = ",".join(str(g) for g in user.groups)
    return [
        setpriv,
        f"--reuid={user.uid}",
        f"--regid={user.gid}",
        f"--groups={groups}" if groups else "--clear-groups",
        "--",
    ]


def find_tools() -> Tools:
    """unshare, setpriv and sh from the system's own directories, each root's and written by
    root alone (else left out: root never runs what another user could have changed)."""

    def system(name: str) -> str:
        found = shutil.which(name, path=SYSTEM_PATH) or ""
        return found if found and refusal(found, SYSTEM_PATH, {0}) is None else ""

    return Tools(unshare=system("unshare"), setpriv=system("setpriv"), shell=system("sh"))


def probe_namespace(tools: Tools, as_root: bool, user: AgentUser | None = None) -> tuple[str, str]:
    """How this host lets the daemon make a pid namespace, tried once (a `true` in one):
    `root` (root with CAP_SYS_ADMIN), `user` (inside a user namespace the agent's user makes:
    `user` is the agent user a root daemon switches to first), or "" with the reason why not."""
    if not tools.unshare or not tools.shell:
        return "", "util-linux's unshare (root-owned) is not installed"
    if as_root and not tools.setpriv:
        return "", "util-linux's setpriv (root-owned) is not installed"
    said = ""
    if as_root:
        said = _try([tools.unshare, *_PID_NAMESPACE, tools.shell, "-c", "exit 0"])
        if not said:
            return "root", ""
    to_user = _setpriv(tools.setpriv, user) if as_root and user is not None else []
    unshare = [tools.unshare, "--user", "--map-current-user", *_PID_NAMESPACE]
    in_user = _try([*to_user, *unshare, tools.shell, "-c", "exit 0"])
    if not in_user:
        return "user", ""
    return "", f"the kernel refused a pid namespace: {said or in_user}"


def _try(argv: list[str]) -> str:
    """ "" when `argv` exits 0, else what it said."""
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=PROBE_TIMEOUT, check=False, env={"PATH": SYSTEM_PATH}
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{argv[0]} could not run: {exc}"
    if done.returncode == 0:
        return ""
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"
