"""Helpers shared by the reference server's tests."""

from __future__ import annotations

from typing import Any

import httpx

from daemon.server.bodies import RuntimeIn
from daemon.server.store import Store


def register(
    store: Store, daemon_id: str = "d1", *types: str, workspace: str = "default"
) -> dict[str, str]:
    """Register runtimes of `types` (default: claude) for the daemon; runtime id by type."""
    runtimes = store.register(
        daemon_id=daemon_id,
        workspace_id=workspace,
        runtimes=[RuntimeIn(type=t, name=t.title()) for t in types or ("claude",)],
    )
    return {r["provider"]: r["id"] for r in runtimes}


async def register_http(
    client: httpx.AsyncClient, daemon_id: str = "d1", *types: str
) -> dict[str, str]:
    """Register over HTTP in the default workspace; runtime id by type."""
    answer = await client.post(
        "/api/daemon/register",
        json={
            "workspace_id": "default",
            "daemon_id": daemon_id,
            "device_name": "test-box",
            "cli_version": "0.1.0",
            "runtimes": [
                {"name": t.title(), "type": t, "version": "1.0", "status": "online"}
                for t in types or ("claude",)
            ],
        },
    )
    assert answer.status_code == 200, answer.text
    return {r["provider"]: r["id"] for r in answer.json()["runtimes"]}


async def claim_http(
    client: httpx.AsyncClient, daemon_id: str, runtime_ids: list[str], max_tasks: int = 10
) -> list[dict[str, Any]]:
    """Claim over HTTP; the handed-out tasks."""
    answer = await client.post(
        "/api/daemon/tasks/claim",
        json={"daemon_id": daemon_id, "runtime_ids": runtime_ids, "max_tasks": max_tasks},
    )
    assert answer.status_code == 200, answer.text
    tasks: list[dict[str, Any]] = answer.json()["tasks"]
    return tasks
