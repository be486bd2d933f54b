"""A daemon against the Multica-faithful server: runtimes deleted, workspaces refused or
changed, pending actions, token renewal and the health document, as Multica's daemon does."""

from __future__ import annotations

import re
import socket
import sys
from pathlib import Path

import httpx
import pytest

from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import TOKEN, eventually, running_daemon

pytestmark = pytest.mark.anyio

FAST = {"MULTICA_DAEMON_HEARTBEAT_INTERVAL": "100ms"}


def beats(fake: MulticaFake, runtime_id: str) -> int:
    """How many heartbeats the server read for one runtime."""
    return sum(1 for r in fake.seen("heartbeat") if r.body["runtime_id"] == runtime_id)


async def test_a_deleted_runtime_is_registered_again_once_then_heartbeated_and_claimed(
    tmp_path: Path,
) -> None:
    """After a heartbeat 404 the daemon registers once, heartbeats the new id, claims with it."""
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **FAST):
        (old,) = fake.live_runtimes()
        await eventually(lambda: beats(fake, old.id) >= 1)
        registers = len(fake.seen("register"))
        fake.delete_runtime(old.id)
        await eventually(lambda: len(fake.live_runtimes()) == 1)
        (new,) = fake.live_runtimes()
        # Ten more heartbeat periods: the old code registered again on every one of them.
        await eventually(lambda: beats(fake, new.id) >= 10)
        assert len(fake.seen("register")) == registers + 1
        assert new.id != old.id
        old_beats = beats(fake, old.id)
        task_id = fake.queue_issue()
        await eventually(lambda: fake.tasks[task_id].status == "completed")
        assert fake.tasks[task_id].runtime_id == new.id
        assert beats(fake, old.id) == old_beats
        assert f"/api/daemon/runtimes/{new.id}/recover-orphans" in [
            r.path for r in fake.seen("recover-orphans")
        ]


async def test_runtimes_deleted_together_cost_one_register(tmp_path: Path) -> None:
    """Both runtimes of a workspace deleted at once: their two 404s trigger one register."""
    command = {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": "-c pass"}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **FAST, **command):
        old = fake.live_runtimes()
        assert sorted(r.provider for r in old) == ["command", "scripted"]
        registers = len(fake.seen("register"))
        for runtime in old:
            fake.delete_runtime(runtime.id)
        await eventually(lambda: len(fake.live_runtimes()) == 2)
        new = fake.live_runtimes()
        await eventually(lambda: all(beats(fake, r.id) >= 5 for r in new))
        assert len(fake.seen("register")) == registers + 1


async def test_a_failed_re_register_waits_and_the_sync_retries_it(tmp_path: Path) -> None:
    """A refused re-register is not repeated per heartbeat; the workspace sync retries it."""
    async with (
        multica_server() as fake,
        running_daemon(
            tmp_path, fake.url, MULTICA_DAEMON_WORKSPACE_SYNC_INTERVAL="1s", **FAST
        ) as d,
    ):
        (old,) = fake.live_runtimes()
        fake.refuse_register(fake.workspace_id)
        registers = len(fake.seen("register"))
        fake.delete_runtime(old.id)
        await eventually(lambda: len(fake.seen("register")) == registers + 1)
        assert d.worker.registration.runtimes == []
        fake.refused_registers.clear()
        await eventually(lambda: len(fake.live_runtimes()) == 1)
        task_id = fake.queue_issue()
        await eventually(lambda: fake.tasks[task_id].status == "completed")
        # Within the 60 s failure backoff only the sync (every ~1 s) registered again.
        assert len(fake.seen("register")) <= registers + 3
        # Without a runtime there is nothing to claim with: no claim names none.
        assert all(r.body["runtime_ids"] for r in fake.seen("claim"))


async def test_one_refused_workspace_leaves_the_other_working(tmp_path: Path) -> None:
    """A 404 on one workspace's register is skipped; the other workspace's tasks run."""
    async with multica_server() as fake:
        refused, other = fake.workspace_id, fake.add_workspace()
        fake.refuse_register(refused)
        async with running_daemon(tmp_path, fake.url) as d:
            assert {r.workspace_id for r in fake.live_runtimes()} == {other}
            task_id = fake.queue_issue(workspace_id=other)
            await eventually(lambda: fake.tasks[task_id].status == "completed")
            assert {w["id"] for w in d.worker.workspaces} == {refused, other}


async def test_the_workspace_sync_adds_retries_and_drops_workspaces(tmp_path: Path) -> None:
    """Every sync registers new and refused-before workspaces and drops vanished ones."""
    async with multica_server() as fake:
        refused = fake.add_workspace("Refused")
        fake.refuse_register(refused)
        env = {"MULTICA_DAEMON_WORKSPACE_SYNC_INTERVAL": "300ms"}
        async with running_daemon(tmp_path, fake.url, **env) as d:
            joined = fake.add_workspace("Joined")
            fake.refused_registers.clear()
            await eventually(lambda: len({r.workspace_id for r in fake.live_runtimes()}) == 3)
            task_id = fake.queue_issue(workspace_id=joined)
            await eventually(lambda: fake.tasks[task_id].status == "completed")
            del fake.workspaces[refused]
            await eventually(lambda: refused not in d.worker.registration.by_workspace)
            assert {w["id"] for w in d.worker.workspaces} == {fake.workspace_id, joined}


async def test_the_health_document_has_gos_shapes(tmp_path: Path) -> None:
    """`agents` are provider names, `workspaces` `{id, runtimes}`; Go's other fields are there."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, health=True) as d,
        # With the daemon's token: without it workspaces and runtimes go by handles.
        httpx.AsyncClient(
            base_url=d.health_url, headers={"Authorization": f"Bearer {d.settings.token}"}
        ) as probe,
    ):
        doc = (await probe.get("/health")).json()
    (runtime,) = fake.live_runtimes()
    assert doc["agents"] == ["scripted"]
    assert [{k: w[k] for k in ("id", "runtimes")} for w in doc["workspaces"]] == [
        {"id": fake.workspace_id, "runtimes": [runtime.id]}
    ]
    assert (doc["profile"], doc["resource_wait_task_count"]) == ("", 0)
    assert doc["os"] == "linux" and doc["cli_version"]
    assert re.fullmatch(r"(\d+h)?(\d+m)?\d+(\.\d+)?s", doc["uptime"])
    assert isinstance(doc["pid"], int) and doc["status"] == "running"
    assert (doc["daemon_id"], doc["server_url"]) == (runtime.daemon_id, fake.url)
    assert "server_circuit" in doc and "outbox_depth" in doc and doc["tasks"] == []


async def test_pending_actions_are_answered_once(tmp_path: Path) -> None:
    """Each pending action gets one result: the model list the runtime's (a scripted one has
    none to offer), the others shaped as an older Multica daemon sends them."""
    async with multica_server() as fake:
        fake.pending = {
            "pending_update": {"id": "u1", "target_version": "9.9.9"},
            "pending_model_list": {"id": "m1"},
            "pending_local_skills": {"id": "s1"},
            "pending_local_skill_import": {"id": "ignored", "skill_key": "k0"},
            "pending_local_skill_imports": [
                {"id": "i1", "skill_key": "k1"},
                {"id": "i2", "skill_key": "k2"},
            ],
        }
        async with running_daemon(tmp_path, fake.url, **FAST):
            (runtime,) = fake.live_runtimes()
            await eventually(lambda: len(fake.action_results) >= 5)
            await eventually(lambda: beats(fake, runtime.id) >= 10)
    results = {(r["kind"], r["request_id"]): r for r in fake.action_results}
    assert len(fake.action_results) == 5
    assert set(results) == {
        ("update", "u1"),
        ("models", "m1"),
        ("local-skills", "s1"),
        ("local-skills/import", "i1"),
        ("local-skills/import", "i2"),
    }
    assert {r["runtime_id"] for r in fake.action_results} == {runtime.id}
    assert results[("update", "u1")]["status"] == "failed"
    assert "not supported" in results[("update", "u1")]["error"]
    models = {k: v for k, v in results[("models", "m1")].items() if k not in ("kind", "request_id")}
    assert models == {
        "runtime_id": runtime.id,
        "status": "completed",
        "models": [],
        "supported": True,
        "fallback": False,
    }
    imported = results[("local-skills/import", "i1")]
    assert imported["status"] == "failed"
    assert imported["error"] == 'provider "scripted" does not expose runtime local skills'
    skills = results[("local-skills", "s1")]
    assert (skills["status"], skills["skills"], skills["supported"]) == ("completed", [], False)


async def test_a_single_pending_import_is_answered_without_the_batch(tmp_path: Path) -> None:
    """An older server's singular `pending_local_skill_import` is answered too."""
    async with multica_server() as fake:
        fake.pending = {"pending_local_skill_import": {"id": "one", "skill_key": "k"}}
        async with running_daemon(tmp_path, fake.url, **FAST):
            await eventually(lambda: len(fake.action_results) == 1)
    assert (fake.action_results[0]["kind"], fake.action_results[0]["request_id"]) == (
        "local-skills/import",
        "one",
    )


async def test_the_token_is_renewed_first_and_then_on_schedule(tmp_path: Path) -> None:
    """The renewal is the first call of all, then repeats every renewal interval."""
    async with (
        multica_server(token=TOKEN) as fake,
        running_daemon(tmp_path, fake.url, MULTICA_DAEMON_TOKEN_RENEW_INTERVAL="100ms"),
    ):
        await eventually(lambda: len(fake.seen("renew")) >= 3)
    assert fake.requests[0].route == "renew"
    assert fake.requests[0].body == {}


async def test_the_runtime_this_host_had_before_uuid_ids_is_merged_into_ours(
    tmp_path: Path,
) -> None:
    """A runtime Multica keeps under this machine's host name (a daemon from before ids were
    UUIDs) is folded into the one the daemon registers: its tasks move, its row goes."""
    async with multica_server() as fake, httpx.AsyncClient(base_url=fake.url) as http:
        body = {
            "workspace_id": fake.workspace_id,
            "daemon_id": socket.gethostname().upper(),
            "device_name": "old",
            "cli_version": "0.2.0",
            "runtimes": [{"name": "Scripted (old)", "type": "scripted", "version": "1"}],
        }
        answer = await http.post("/api/daemon/register", json=body)
        old = answer.json()["runtimes"][0]["id"]
        async with running_daemon(tmp_path, fake.url) as d:
            (ours,) = d.worker.registration.runtimes
            assert fake.merged_runtimes == {old: ours.id}
            assert [r.id for r in fake.live_runtimes()] == [ours.id]
