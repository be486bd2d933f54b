"""Without the daemon's token the health port names tasks and workspaces by handles only."""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest

from daemon.ops.handles import LENGTH, runtime_handle, task_handle, workspace_handle
from tests.helpers import RunningDaemon, eventually, serving_daemon

pytestmark = pytest.mark.anyio

SCRIPT = {
    "steps": [
        {"tool": {"name": "Bash", "call_id": "c1", "input": {"command": "make"}, "seconds": 60}},
        {"result": {"output": "done"}},
    ]
}


def hex_runs(value: str, width: int = 8) -> set[str]:
    """Every `width`-character window of `value`, with and without its dashes: what would
    let a reader rebuild part of the id (the work dir uses the id's last 12 hex digits)."""
    plain = value.replace("-", "").lower()
    return {
        text[i : i + width] for text in (value.lower(), plain) for i in range(len(text) - width + 1)
    }


def test_a_handle_is_short_letters_stable_and_never_part_of_the_id() -> None:
    """Ten letters g-z, the same for the same id, different per kind and per id."""
    ids = [str(uuid.uuid4()) for _ in range(200)]
    handles = [task_handle(i) for i in ids]
    assert all(re.fullmatch(f"[g-z]{{{LENGTH}}}", h) for h in handles)
    assert handles == [task_handle(i) for i in ids]
    assert len(set(handles)) == len(ids)
    assert workspace_handle(ids[0]) != task_handle(ids[0]) != runtime_handle(ids[0])
    assert not any(h in i.replace("-", "") for h, i in zip(handles, ids, strict=True))


def test_another_daemon_start_gives_another_handle() -> None:
    """The key is made per start: a handle cannot be computed from the id in another process."""
    task_id = "6f1c2b4e-0d7a-4f8e-9a51-3c2d1e0f9b87"
    code = f"from daemon.ops.handles import task_handle; print(task_handle({task_id!r}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() != task_handle(task_id)


async def _with_task(d: RunningDaemon) -> str:
    task_id = await d.submit(SCRIPT)

    async def running() -> bool:
        async with httpx.AsyncClient(timeout=5) as http:
            return bool((await http.get(f"{d.health_url}/health")).json()["tasks"])

    await eventually(running)
    return task_id


async def test_health_and_metrics_without_the_token_show_no_id_of_a_task_or_workspace(
    tmp_path: Path,
) -> None:
    """/health and /metrics without the token hold no task, workspace or runtime id, nor any
    8-character run of one; with the token /health names them by id."""
    async with serving_daemon(tmp_path, health=True, MULTICA_DAEMON_SHUTDOWN_GRACE="100ms") as d:
        task_id = await _with_task(d)
        async with httpx.AsyncClient(base_url=d.health_url, timeout=5) as http:
            public = (await http.get("/health")).text
            scrape = (await http.get("/metrics")).text
            wrong = (await http.get("/health", headers={"Authorization": "Bearer nope"})).text
            full = (
                await http.get("/health", headers={"Authorization": f"Bearer {d.settings.token}"})
            ).json()
        workspace_ids = [w["id"] for w in d.worker.workspaces]
        runtime_ids = [r.id for r in d.worker.registration.runtimes]
    secrets = set().union(*(hex_runs(i) for i in [task_id, *workspace_ids, *runtime_ids]))
    assert workspace_ids and runtime_ids
    for body in (public, scrape, wrong):
        leaked = sorted(run for run in secrets if run in body.lower())
        assert leaked == [], leaked
    assert task_handle(task_id) in public
    assert all(workspace_handle(w) in public for w in workspace_ids)
    assert [t["id"] for t in full["tasks"]] == [task_id]
    assert [w["id"] for w in full["workspaces"]] == workspace_ids
    assert full["workspaces"][0]["runtimes"] == runtime_ids
