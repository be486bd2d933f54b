"""Local directories on the Multica-faithful server (Go `handler/daemon.go`, `agent.sql`).

A project's `local_directory` resource (`resource_ref`: `local_path`, `daemon_id`, `label`,
`execution_mode`) rides every claim in `project_resources`, whichever daemon claims. A
`worktree` resource bound to the claiming daemon is refused to a claim that does not name
`local-worktree-v1` in `X-Client-Capabilities`: the task is cancelled with the reason
(`local_directory_error`) and left out of the claim answer (`worktreeClaimBlockReason`).
`POST /api/daemon/tasks/{id}/wait-local-directory` `{reason}` moves a `dispatched` task to
`waiting_local_directory` (anything else: 400; multica_routes.py), which `start`, `fail`, the
prepare lease and a cancel accept like `dispatched`.

    fake.queue_issue(project_resources=[local_directory(path, daemon_id, mode="worktree")])
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CAPABILITY = "local-worktree-v1"
WAITING = "waiting_local_directory"


def local_directory(
    path: str, daemon_id: str, *, mode: str = "", label: str = ""
) -> dict[str, Any]:
    """A `local_directory` project resource as the claim carries it."""
    ref = {"local_path": path, "daemon_id": daemon_id}
    if label:
        ref["label"] = label
    if mode:
        ref["execution_mode"] = mode
    return {"resource_type": "local_directory", "resource_ref": ref}


def blocked(fields: Mapping[str, Any], daemon_id: str, capabilities: str) -> str:
    """Why this daemon may not run a task with these claim fields ("" when it may): a
    worktree resource of its own and a claim without the capability (`capabilities`: the
    claim's `X-Client-Capabilities`)."""
    wanted = {c.strip() for c in capabilities.split(",")}
    if CAPABILITY in wanted:
        return ""
    for resource in fields.get("project_resources") or []:
        ref = resource.get("resource_ref") or {}
        if resource.get("resource_type") != "local_directory":
            continue
        if ref.get("execution_mode") != "worktree" or ref.get("daemon_id") != daemon_id:
            continue
        return (
            "This machine's Multica runtime does not support parallel (worktree) mode, which"
            f" {ref.get('local_path')!r} is set to use. Update the Multica app on that machine to"
            " the latest version, then re-run this task."
        )
    return ""
