"""The Multica-faithful test server answers the daemon routes as the Go handlers do."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.fakes.multica_local import local_directory
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio
DAEMON = "0190f5e2-7c1a-7d3e-9b2a-1f2e3d4c5b6a"


@asynccontextmanager
async def registered() -> AsyncIterator[tuple[MulticaFake, httpx.AsyncClient, str]]:
    """A fresh server, a client on it, and one registered `scripted` runtime."""
    async with multica_server() as fake, httpx.AsyncClient(base_url=fake.url) as http:
        runtime_id = await register(http, fake.workspace_id)
        yield fake, http, runtime_id


async def register(http: httpx.AsyncClient, workspace_id: str, daemon_id: str = DAEMON) -> str:
    body = {
        "workspace_id": workspace_id,
        "daemon_id": daemon_id,
        "device_name": "box",
        "cli_version": "1",
        "runtimes": [{"name": "Scripted", "type": "scripted", "version": "1", "status": "online"}],
    }
    answer = await http.post("/api/daemon/register", json=body)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["runtimes"][0]["id"])


async def claim(http: httpx.AsyncClient, runtime_ids: list[str], n: int = 5) -> Any:
    body = {"daemon_id": DAEMON, "runtime_ids": runtime_ids, "max_tasks": n}
    return await http.post("/api/daemon/tasks/claim", json=body)


async def test_a_claim_carries_no_prompt_but_the_issue_and_a_task_token() -> None:
    """A claimed issue task has `issue_id` and a `mat_` token, and no `prompt` at all."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue("issue-7")
        (task,) = (await claim(http, [runtime_id])).json()["tasks"]
        assert task["id"] == task_id
        assert task["issue_id"] == "issue-7"
        assert task["auth_token"].startswith("mat_")
        assert task["runtime_id"] == runtime_id
        assert "prompt" not in task
        assert fake.tasks[task_id].status == "dispatched"


async def test_each_task_kind_is_shaped_like_multicas() -> None:
    """Comment, chat, autopilot and quick-create tasks carry their own fields."""
    async with registered() as (fake, http, runtime_id):
        fake.queue_comment("please look", trigger_author_type="agent")
        fake.queue_chat("hi")
        fake.queue_autopilot("Nightly", "check")
        fake.queue_quick_create("add dark mode")
        tasks = (await claim(http, [runtime_id])).json()["tasks"]
        assert tasks[0]["trigger_comment_content"] == "please look"
        assert tasks[0]["trigger_comment_id"]
        assert tasks[1]["chat_message"] == "hi"
        assert tasks[1]["chat_session_id"]
        assert tasks[2]["autopilot_run_id"]
        assert tasks[2]["autopilot_title"] == "Nightly"
        assert tasks[3]["quick_create_prompt"] == "add dark mode"


async def test_folded_comments_come_one_by_one_only_to_a_daemon_that_names_it() -> None:
    """`coalesced-comments-v1` in the request: each earlier comment with its thread; without
    it, every comment folded into the trigger's text between markers, as Go folds them."""
    folded = [{"id": "c-1", "thread_id": "th-1", "content": "older", "created_at": "2026-01-01"}]
    async with registered() as (fake, http, runtime_id):
        fake.queue_comment("newest", coalesced=folded, trigger_comment_id="c-9")
        fake.queue_comment("newest", coalesced=folded, trigger_comment_id="c-9")
        (old,) = (await claim(http, [runtime_id], 1)).json()["tasks"]
        http.headers["X-Client-Capabilities"] = "skill-bundles-v1,coalesced-comments-v1"
        (new,) = (await claim(http, [runtime_id], 1)).json()["tasks"]
    assert old["coalesced_comments"] is None and old["coalesced_comment_ids"] is None
    bundle = old["trigger_comment_content"]
    assert bundle.startswith("This run covers multiple distinct issue comments.")
    assert "\n--- comment c-1 [thread th-1] [created 2026-01-01] ---\nolder\n" in bundle
    assert "---\nnewest\n--- end comment c-9 ---" in bundle
    assert new["trigger_comment_content"] == "newest"
    assert new["coalesced_comment_ids"] == ["c-1"]
    assert new["coalesced_comments"] == [{**folded[0]}]


async def test_unknown_foreign_and_malformed_runtime_ids_are_skipped() -> None:
    """A claim naming runtimes the daemon does not own answers 200 with what it can claim."""
    async with registered() as (fake, http, runtime_id):
        other = await register(http, fake.workspace_id, daemon_id=str(DAEMON[::-1]))
        fake.queue_issue()
        answer = await claim(http, ["not-a-uuid", other, DAEMON])
        assert (answer.status_code, answer.json()) == (200, {"tasks": []})
        assert len((await claim(http, ["not-a-uuid", runtime_id])).json()["tasks"]) == 1


async def test_a_claim_hands_out_at_most_32_tasks() -> None:
    """`max_tasks` above 32 is capped; 0 claims nothing; a negative count is a 400."""
    async with registered() as (fake, http, runtime_id):
        for _ in range(40):
            fake.queue_issue()
        assert (await claim(http, [runtime_id], 0)).json() == {"tasks": []}
        assert (await claim(http, [runtime_id], -1)).status_code == 400
        assert len((await claim(http, [runtime_id], 100)).json()["tasks"]) == 32


async def test_start_of_a_task_that_is_no_longer_dispatched_is_refused() -> None:
    """A task cancelled between claim and start answers 400 and stays cancelled."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        fake.cancel(task_id)
        answer = await http.post(f"/api/daemon/tasks/{task_id}/start", json={})
        assert answer.status_code == 400
        assert fake.tasks[task_id].status == "cancelled"


async def test_complete_of_a_task_that_is_not_running_changes_nothing() -> None:
    """`complete` on a dispatched or cancelled task answers 200 with the task unchanged."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        answer = await http.post(f"/api/daemon/tasks/{task_id}/complete", json={"output": "x"})
        assert answer.status_code == 200
        assert answer.json()["status"] == "dispatched"
        assert fake.tasks[task_id].output == ""


async def test_a_dispatched_task_can_fail_and_an_empty_reason_is_classified() -> None:
    """`fail` before `start` is allowed; no reason means the server classifies one."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        body = {"error": "start task failed: 400", "failure_reason": ""}
        answer = await http.post(f"/api/daemon/tasks/{task_id}/fail", json=body)
        assert answer.status_code == 200
        assert fake.tasks[task_id].status == "failed"
        assert fake.tasks[task_id].failure_reason == "agent_error.unknown"


async def test_a_run_goes_through_start_and_complete() -> None:
    """Claim, start, complete: the task ends completed with the reported output."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        assert (await http.post(f"/api/daemon/tasks/{task_id}/start", json={})).status_code == 200
        done = {"output": "ok", "session_id": "s", "work_dir": "/w"}
        await http.post(f"/api/daemon/tasks/{task_id}/complete", json=done)
        status = await http.get(f"/api/daemon/tasks/{task_id}/status")
        assert status.json() == {"status": "completed"}
        assert (fake.tasks[task_id].output, fake.tasks[task_id].work_dir) == ("ok", "/w")


async def test_a_deleted_runtime_is_not_found_until_registered_again() -> None:
    """Heartbeats of a deleted runtime get 404; registering again gives a new runtime id."""
    async with registered() as (fake, http, runtime_id):
        beat = {"runtime_id": runtime_id}
        assert (await http.post("/api/daemon/heartbeat", json=beat)).json() == {"status": "ok"}
        fake.delete_runtime(runtime_id)
        gone = await http.post("/api/daemon/heartbeat", json=beat)
        assert (gone.status_code, gone.json()) == (404, {"error": "runtime not found"})
        fresh = await register(http, fake.workspace_id)
        assert fresh != runtime_id
        assert (await http.post("/api/daemon/heartbeat", json={"runtime_id": fresh})).is_success


async def test_a_restarted_daemon_gets_its_runtime_back() -> None:
    """Registering again with the same daemon id and backend returns the same runtime."""
    async with registered() as (fake, http, runtime_id):
        assert await register(http, fake.workspace_id) == runtime_id


async def test_one_workspaces_register_can_be_refused() -> None:
    """The refused workspace gets 404 `workspace not found`; another registers normally."""
    async with multica_server() as fake, httpx.AsyncClient(base_url=fake.url) as http:
        other = fake.add_workspace()
        fake.refuse_register(fake.workspace_id)
        body = {"workspace_id": fake.workspace_id, "daemon_id": DAEMON, "runtimes": [{}]}
        refused = await http.post("/api/daemon/register", json=body)
        assert (refused.status_code, refused.json()["error"]) == (404, "workspace not found")
        await register(http, other)
        listed = (await http.get("/api/daemon/workspaces")).json()
        assert {w["id"] for w in listed} == {fake.workspace_id, other}


async def test_messages_are_stored_as_sent_without_seq_dedupe() -> None:
    """The same batch sent twice is stored twice, as in Multica's messages table."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        batch = {"messages": [{"seq": 1, "type": "text", "content": "hi"}]}
        for _ in range(2):
            await http.post(f"/api/daemon/tasks/{task_id}/messages", json=batch)
        stored = (await http.get(f"/api/daemon/tasks/{task_id}/messages")).json()
        assert [m["seq"] for m in stored] == [1, 1]


async def test_a_dropped_answer_is_lost_after_the_server_acted() -> None:
    """The client sees the connection cut, yet the server stored the batch."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        fake.drop_answers("messages")
        batch = {"messages": [{"seq": 1, "type": "text", "content": "hi"}]}
        with pytest.raises(httpx.TransportError):
            await http.post(f"/api/daemon/tasks/{task_id}/messages", json=batch)
        assert len(fake.messages_of(task_id)) == 1
        again = await http.post(f"/api/daemon/tasks/{task_id}/messages", json=batch)
        assert again.is_success
        assert len(fake.seen("messages")) == 2


async def test_usage_is_upserted_per_provider_and_model() -> None:
    """A second report for the same model replaces the first."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        for tokens in (5, 9):
            entry = {"provider": "anthropic", "model": "m", "input_tokens": tokens}
            await http.post(f"/api/daemon/tasks/{task_id}/usage", json={"usage": [entry]})
        assert fake.usage == {(task_id, "anthropic", "m"): entry}


async def test_task_routes_for_an_unknown_task_are_not_found() -> None:
    """Status, start, complete, fail, usage and cancel-ack of an unknown task answer 404."""
    async with registered() as (_, http, _runtime):
        missing = "/api/daemon/tasks/0190f5e2-0000-7000-8000-000000000000"
        assert (await http.get(f"{missing}/status")).json() == {"error": "task not found"}
        for action in ("start", "complete", "fail", "usage", "cancel-ack"):
            assert (await http.post(f"{missing}/{action}", json={})).status_code == 404


async def test_a_server_cancel_is_acknowledged() -> None:
    """A cancelled task reads `cancelled` and counts the daemon's cancel-ack."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        fake.cancel(task_id)
        assert (await http.get(f"/api/daemon/tasks/{task_id}/status")).json()["status"] == (
            "cancelled"
        )
        await http.post(f"/api/daemon/tasks/{task_id}/cancel-ack", json={})
        assert fake.tasks[task_id].cancel_acks == 1


async def test_recover_orphans_fails_what_the_runtime_left_in_flight() -> None:
    """Dispatched tasks of the runtime fail with `runtime_recovery`, and each issue task is
    retried once, at once (Go's default two attempts); the retry of a retry is not."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        path = f"/api/daemon/runtimes/{runtime_id}/recover-orphans"
        assert (await http.post(path, json={})).json() == {"orphaned": 1, "retried": 1}
        failed = fake.tasks[task_id]
        assert (failed.status, failed.failure_reason) == ("failed", "runtime_recovery")
        assert failed.error == "daemon restarted while task was in flight"
        [child] = [t for t in fake.tasks.values() if t.parent_id == task_id]
        assert (child.status, child.attempt, child.fire_at) == ("queued", 2, 0.0)
        await claim(http, [runtime_id])
        assert (await http.post(path, json={})).json() == {"orphaned": 1, "retried": 0}


async def test_a_pinned_session_is_what_the_crash_retry_resumes() -> None:
    """`session` pins a running task's session and work dir (204; 400 with neither); after
    recover-orphans the retry's claim offers both."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        await http.post(f"/api/daemon/tasks/{task_id}/start", json={})
        pin = f"/api/daemon/tasks/{task_id}/session"
        assert (await http.post(pin, json={})).status_code == 400
        answer = await http.post(pin, json={"session_id": "s-1", "work_dir": "/w/1"})
        assert answer.status_code == 204
        assert (await http.post(pin, json={"work_dir": "/w/2"})).status_code == 204
        assert (fake.tasks[task_id].session_id, fake.tasks[task_id].work_dir) == ("s-1", "/w/2")
        await http.post(f"/api/daemon/runtimes/{runtime_id}/recover-orphans", json={})
        [retry] = (await claim(http, [runtime_id])).json()["tasks"]
        assert (retry["prior_session_id"], retry["prior_work_dir"]) == ("s-1", "/w/2")
        done = f"/api/daemon/tasks/{task_id}/session"
        assert (await http.post(done, json={"session_id": "late"})).status_code == 204
        assert fake.tasks[task_id].session_id == "s-1"  # a finished row is left alone


async def test_a_wrong_token_is_refused_and_renewal_answers() -> None:
    """With a token set, other bearers get 401; the token renewal route answers."""
    async with multica_server(token="mul_good") as fake:
        async with httpx.AsyncClient(base_url=fake.url) as anonymous:
            assert (await anonymous.get("/api/daemon/workspaces")).status_code == 401
        headers = {"Authorization": "Bearer mul_good"}
        async with httpx.AsyncClient(base_url=fake.url, headers=headers) as http:
            renewed = await http.post("/api/tokens/current/renew", json={})
            assert renewed.json() == {"expires_at": "", "renewed": False}
        assert [r.route for r in fake.requests] == ["workspaces", "renew"]


async def test_the_daemon_runs_a_multica_task_against_the_fake(tmp_path: Path) -> None:
    """Today's daemon registers, claims, starts and completes an issue task on this server."""
    async with multica_server() as fake, running_daemon(tmp_path, fake.url):
        task_id = fake.queue_issue("issue-42")
        await eventually(lambda: fake.tasks[task_id].status == "completed")
        assert "issue-42" in fake.tasks[task_id].output
        assert [r.route for r in fake.seen("start")] == ["start"]
        assert fake.live_runtimes()[0].daemon_id


async def test_a_control_connection_that_falls_behind_is_evicted_not_an_error() -> None:
    """As Multica's hub evicts a slow client: a connection whose queue is full is dropped and
    its queue closed, and queueing the task still works."""
    async with registered() as (fake, _http, runtime_id):
        send, receive = anyio.create_memory_object_stream[dict[str, Any] | str](1)
        with receive:
            entry = (frozenset({runtime_id}), send)
            fake.watchers.append(entry)
            fake.queue_issue()  # fills the queue
            second = fake.queue_issue()
            assert entry not in fake.watchers
            assert second in fake.tasks
            with pytest.raises(anyio.ClosedResourceError):
                send.send_nowait("after the eviction")


async def test_the_control_socket_announces_a_queued_task() -> None:
    """A daemon watching its runtime hears `daemon:task_available` when a task is queued."""
    async with registered() as (fake, _http, runtime_id):
        url = fake.url.replace("http://", "ws://") + f"/api/daemon/ws?runtime_ids={runtime_id}"
        async with connect(url) as socket:
            await eventually(lambda: len(fake.watchers) == 1)
            task_id = fake.queue_issue()
            frame = json.loads(await socket.recv())
        assert frame == {
            "type": "daemon:task_available",
            "payload": {"runtime_id": runtime_id, "task_id": task_id},
        }
        await eventually(lambda: fake.watchers == [])


async def test_the_control_socket_refuses_an_unknown_runtime() -> None:
    """Watching a runtime the server does not know is refused before the upgrade."""
    async with registered() as (fake, _http, runtime_id):
        fake.delete_runtime(runtime_id)
        url = fake.url.replace("http://", "ws://") + f"/api/daemon/ws?runtime_ids={runtime_id}"
        with pytest.raises(InvalidStatus):
            async with connect(url):
                pass


async def test_pending_actions_ride_on_heartbeats_and_their_results_are_kept() -> None:
    """A pending update is in each heartbeat answer; the daemon's result for it is stored."""
    async with registered() as (fake, http, runtime_id):
        fake.pending = {"pending_update": {"id": "u-1", "target_version": "9.9.9"}}
        beat = (await http.post("/api/daemon/heartbeat", json={"runtime_id": runtime_id})).json()
        assert beat["pending_update"] == {"id": "u-1", "target_version": "9.9.9"}
        result = {"status": "failed", "error": "self-update is not supported"}
        path = f"/api/daemon/runtimes/{runtime_id}/update/u-1/result"
        assert (await http.post(path, json=result)).is_success
        skills = f"/api/daemon/runtimes/{runtime_id}/local-skills/import/r-2/result"
        assert (await http.post(skills, json={"status": "failed", "error": "x"})).is_success
        assert [(r["kind"], r["request_id"]) for r in fake.action_results] == [
            ("update", "u-1"),
            ("local-skills/import", "r-2"),
        ]
        assert fake.action_results[0]["error"] == "self-update is not supported"


async def test_a_worktree_folder_is_refused_to_a_daemon_without_the_capability() -> None:
    """A worktree resource bound to the claiming daemon, no `local-worktree-v1`: the task is
    cancelled with the reason and left out of the claim; with it, the task is handed out.
    Another daemon's resource, or an in-place one, never blocks."""

    def resource(mode: str, daemon: str = DAEMON) -> list[dict[str, Any]]:
        return [local_directory("/home/u/app", daemon, mode=mode)]

    async with registered() as (fake, http, runtime_id):
        blocked = fake.queue_issue(project_resources=resource("worktree"))
        others = fake.queue_issue(project_resources=resource("worktree", "another"))
        in_place = fake.queue_issue(project_resources=resource("in_place"))
        handed = [t["id"] for t in (await claim(http, [runtime_id])).json()["tasks"]]
        http.headers["X-Client-Capabilities"] = "local-worktree-v1"
        capable = fake.queue_issue(project_resources=resource("worktree"))
        (again,) = (await claim(http, [runtime_id])).json()["tasks"]
    assert handed == [others, in_place]
    task = fake.tasks[blocked]
    assert (task.status, task.failure_reason) == ("cancelled", "local_directory_error")
    assert "does not support parallel (worktree) mode" in task.error
    assert again["id"] == capable


async def test_a_task_waits_for_its_folder_only_while_dispatched_and_starts_from_there() -> None:
    """`wait-local-directory` moves a dispatched task to `waiting_local_directory` with its
    reason (anything else: 400); `start` and the prepare lease take it from there."""
    async with registered() as (fake, http, runtime_id):
        task_id = fake.queue_issue()
        await claim(http, [runtime_id])
        path = f"/api/daemon/tasks/{task_id}"
        waited = await http.post(f"{path}/wait-local-directory", json={"reason": "App"})
        again = await http.post(f"{path}/wait-local-directory", json={"reason": "App"})
        lease_path = f"/api/daemon/runtimes/{runtime_id}/tasks/{task_id}/prepare-lease"
        lease = await http.post(lease_path, json={})
        status = (await http.get(f"{path}/status")).json()["status"]
        started = await http.post(f"{path}/start", json={})
    assert waited.status_code == 200 and again.status_code == 400
    assert lease.status_code == 200 and status == "waiting_local_directory"
    assert started.status_code == 200 and fake.tasks[task_id].status == "running"
    assert fake.tasks[task_id].waits == ["App"]


async def _said(socket: Any, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Send one frame and read the next (the answer)."""
    await socket.send(json.dumps({"type": kind, "payload": payload}))
    with anyio.fail_after(10):
        answer: dict[str, Any] = json.loads(await socket.recv())
    return answer


async def test_the_control_socket_answers_heartbeats_and_claims_as_the_hub_does() -> None:
    """A heartbeat is acked `ok` with `rpc-v1` and the pending actions; `tasks.claim` is the
    HTTP claim's answer; a deleted runtime's heartbeat is acked `runtime_gone`."""
    async with registered() as (fake, _http, runtime_id):
        fake.runtimes[runtime_id].queued["pending_model_list"] = {"id": "m1"}
        task_id = fake.queue_issue()
        url = fake.url.replace("http://", "ws://") + f"/api/daemon/ws?runtime_ids={runtime_id}"
        async with connect(url) as socket:
            ack = await _said(socket, "daemon:heartbeat", {"runtime_id": runtime_id})
            claim = {"daemon_id": DAEMON, "runtime_ids": [runtime_id], "max_tasks": 2}
            request = {"request_id": "q1", "method": "tasks.claim", "body": claim}
            answer = await _said(socket, "daemon:rpc_request", request)
            unknown = await _said(socket, "daemon:rpc_request", {"request_id": "q2"})
            fake.delete_runtime(runtime_id)
            gone = await _said(socket, "daemon:heartbeat", {"runtime_id": runtime_id})
    assert ack == {
        "type": "daemon:heartbeat_ack",
        "payload": {
            "runtime_id": runtime_id,
            "status": "ok",
            "pending_model_list": {"id": "m1"},
            "server_capabilities": ["rpc-v1"],
        },
    }
    assert answer["type"] == "daemon:rpc_response"
    assert (answer["payload"]["request_id"], answer["payload"]["status"]) == ("q1", 200)
    assert [t["id"] for t in answer["payload"]["body"]["tasks"]] == [task_id]
    assert fake.tasks[task_id].handed == ["socket"]
    assert unknown["payload"]["status"] == 404
    assert gone["payload"] == {
        "runtime_id": runtime_id,
        "status": "runtime_gone",
        "runtime_gone": True,
    }
    kinds = [f.route for f in fake.frames]
    assert kinds == ["heartbeat", "rpc_request", "rpc_request", "heartbeat"]


async def test_a_task_dispatched_and_never_started_is_handed_out_again() -> None:
    """Go's stale-dispatch reclaim: a claimed task nobody started comes again in a claim of
    its runtimes once the recovery window and its prepare lease passed; a started one never
    does."""
    async with registered() as (fake, http, runtime_id):
        fake.claim_recovery, fake.prepare_lease = 3600.0, 0.0
        lost, started = fake.queue_issue(), fake.queue_issue()
        assert len((await claim(http, [runtime_id])).json()["tasks"]) == 2
        await http.post(f"/api/daemon/tasks/{started}/start", json={})
        assert (await claim(http, [runtime_id])).json()["tasks"] == []
        fake.claim_recovery = 0.0
        (again,) = (await claim(http, [runtime_id])).json()["tasks"]
    assert again["id"] == lost
    assert fake.tasks[lost].handed == ["http", "http"]
