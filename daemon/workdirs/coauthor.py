"""The `Co-authored-by` trailer on the commits an agent makes in its checkouts.

As Multica's daemon does, each checkout gets a `prepare-commit-msg` hook that adds
`Co-authored-by: multica-agent <github@multica.ai>` to every commit message (merges and
squashes aside, and never twice), so GitHub shows the agent beside the committer. It is on
unless the workspace's settings turn it off: `github_enabled: false` (the GitHub master switch)
or `co_authored_by_enabled: false`; absent or unreadable settings mean on. Turned off, the hook
is removed again, but only a hook that carries the marker line Multica's daemons write: a hook
of the user's or another tool's stays.

A worktree's hooks are those of its repository's cache (git reads the common directory's), so
the hook is written there, for every worktree of that cache in the workspace. An isolated
checkout (always so with an agent user) has its own `.git/hooks`, in the agent's work dir: it
is written there through directory handles from the task's own folder (daemon/boundary/beneath.py,
no link followed) and handed to the agent's user. The daemon's own git never runs a hook.
"""

from __future__ import annotations

import logging
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from daemon.boundary.beneath import (
    Owner,
    UnsafePathError,
    opened_dir,
    read_at,
    relative_parts,
    remove_at,
    stat_at,
    write_under,
)

log = logging.getLogger(__name__)

TRAILER = "Co-authored-by: multica-agent <github@multica.ai>"
MARKER = "# multica:prepare-commit-msg:co-authored-by"
"""The line by which Multica's daemons know a hook as theirs (and remove only such a one)."""
_OLDER_MARKER = "# Installed by the Multica daemon."
"""What hooks written before the marker line existed carry."""
HOOK = f"""#!/bin/sh
{MARKER}
# agent-daemon: the agent is named as a co-author of every commit made here. Rewritten or
# removed with the workspace's settings at each checkout: changes here do not last.
case "$2" in merge|squash) exit 0 ;; esac
trailer='{TRAILER}'
grep -qF "$trailer" "$1" && exit 0
exec git interpret-trailers --in-place --trailer "$trailer" "$1"
"""
NAME = "prepare-commit-msg"
_READ_LIMIT = 64 * 1024


def co_authored(settings: Mapping[str, Any] | None) -> bool:
    """Whether a workspace with these settings wants the trailer (on unless switched off)."""
    if not settings:
        return True
    github, own = settings.get("github_enabled"), settings.get("co_authored_by_enabled")
    if any(v is not None and not isinstance(v, bool) for v in (github, own)):
        return True  # settings it cannot read, as Go's daemon: the default
    return github is not False and own is not False


def place_hook(task_dir: Path, checkout: Path, bare: Path, on: bool, owner: Owner | None) -> None:
    """Write (`on`) or remove the hook for the checkout at `checkout`, which lies under
    `task_dir` (the task's own folder, the anchor); `bare` is its repository's cache, `owner`
    the agent user an isolated checkout belongs to. A failure is logged, never raised: the
    checkout stands without the trailer."""
    try:
        inside = relative_parts(checkout.relative_to(task_dir).parts)
        with opened_dir(task_dir, inside) as repo_fd:
            found = stat_at(repo_fd, ".git")
        if found is None:
            return
        if stat.S_ISREG(found.st_mode):  # a worktree: git reads its cache's hooks
            _set(bare, ("hooks",), on, None)
        elif stat.S_ISDIR(found.st_mode):
            _set(task_dir, (*inside, ".git", "hooks"), on, owner)
    except (OSError, UnsafePathError, ValueError) as exc:
        what = "write" if on else "remove"
        log.warning("repo checkout: could not %s the co-author hook of %s: %s", what, checkout, exc)


def _set(anchor: Path, hooks: tuple[str, ...], on: bool, owner: Owner | None) -> None:
    if on:
        write_under(anchor, "/".join((*hooks, NAME)), HOOK, mode=0o755, owner=owner)
        return
    try:
        with opened_dir(anchor, hooks) as hooks_fd:
            if stat_at(hooks_fd, NAME) is None:
                return
            text = read_at(hooks_fd, NAME, _READ_LIMIT).decode("utf-8", "replace")
            if MARKER in text or _OLDER_MARKER in text:
                remove_at(hooks_fd, NAME)
    except FileNotFoundError:
        return  # no hooks directory: nothing of ours to remove
