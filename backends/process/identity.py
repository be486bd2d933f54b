"""The user an agent runs as: its uid, gid and groups for the spawn, its HOME for the
environment.

A root daemon with an agent user starts every agent process with that user's credentials,
set in the child between fork and exec by the standard library (`setgroups`, `setregid`,
`setreuid`: `subprocess`'s `extra_groups`, `group` and `user`, which `anyio.open_process`
passes through). The groups are always given, the empty list included: left out, the child
would keep the daemon's own supplementary groups (root's) under the new uid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# What names the daemon user's own places: an agent with another HOME must not be pointed
# back into the daemon's (it could not write there, and should not read there).
_DAEMON_USERS_OWN = frozenset(
    {
        "XDG_CONFIG_HOME",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "XDG_RUNTIME_DIR",
        "MAIL",
    }
)


@dataclass(frozen=True, slots=True)
class AgentUser:
    """An account from the password database that agents run as."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    """Supplementary groups (the primary one included, as `initgroups` sets them)."""
    home: str

    @property
    def owner(self) -> tuple[int, int]:
        """(uid, gid): what the files handed to the agent are owned by."""
        return self.uid, self.gid

    def spawn_options(self) -> dict[str, Any]:
        """The `anyio.open_process` arguments that start a process as this user."""
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}

    def environ(self, env: Mapping[str, str]) -> dict[str, str]:
        """`env` as this user's: its HOME, USER and LOGNAME, and none of the daemon user's
        XDG directories (idempotent)."""
        mine = {k: v for k, v in env.items() if k not in _DAEMON_USERS_OWN}
        mine.update(HOME=self.home, USER=self.name, LOGNAME=self.name)
        return mine
