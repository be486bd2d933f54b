"""A daemon's heartbeats and claims on the Multica-faithful server's control WebSocket: HTTP
quiet while the socket answers, back at once when it drops, a deleted runtime registered
again from its ack, claims over `rpc-v1` and a lost answer's safe fallback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import RunningDaemon, eventually, running_daemon

pytestmark = pytest.mark.anyio

# Nothing comes on its own schedule unless a test says so: what happens, the socket caused.
QUIET = {
    "MULTICA_DAEMON_HEARTBEAT_INTERVAL": "1h",
    "MULTICA_DAEMON_WORKSPACE_SYNC_INTERVAL": "1h",
    "MULTICA_DAEMON_POLL_INTERVAL": "1h",
}


def socket_beats(fake: MulticaFake, runtime_id: str) -> int:
    """The heartbeats the daemon sent on the socket for one runtime."""
    beats = [f for f in fake.frames if f.route == "heartbeat"]
    return sum(1 for f in beats if f.body["runtime_id"] == runtime_id)


def socket_claims(fake: MulticaFake) -> list[dict[str, object]]:
    """The claims the daemon asked on the socket (the request payloads)."""
    requests = [f.body for f in fake.frames if f.route == "rpc_request"]
    return [r for r in requests if r["method"] == "tasks.claim"]


async def acked(d: RunningDaemon, *runtime_ids: str) -> None:
    """Until the socket has answered a heartbeat of each runtime and said `rpc-v1`."""
    channel = d.worker.pickup.channel
    assert channel is not None
    heartbeats = d.worker.heartbeats
    await eventually(
        lambda: channel.calls.ready and all(heartbeats.over_socket(r) for r in runtime_ids),
        within=10.0,
    )


async def test_with_the_socket_up_no_heartbeat_goes_over_http(tmp_path: Path) -> None:
    """Two runtimes heartbeating every 0.3 s: over several beats of each, no HTTP heartbeat,
    and a model list an ack hands out is answered."""
    async with multica_server() as fake:
        second = fake.add_workspace()
        env = {**QUIET, "MULTICA_DAEMON_HEARTBEAT_INTERVAL": "300ms"}
        async with running_daemon(tmp_path, fake.url, control=True, **env) as d:
            ids = [r.id for r in fake.live_runtimes()]
            assert len(ids) == 2 and second in {r.workspace_id for r in fake.live_runtimes()}
            await acked(d, *ids)
            http = len(fake.seen("heartbeat"))
            fake.runtimes[ids[0]].queued["pending_model_list"] = {"id": "m1"}
            wanted = {r: socket_beats(fake, r) + 5 for r in ids}
            await eventually(lambda: all(socket_beats(fake, r) >= n for r, n in wanted.items()))
            await eventually(lambda: len(fake.action_results) == 1)
            assert len(fake.seen("heartbeat")) == http
    (result,) = fake.action_results
    assert (result["kind"], result["runtime_id"], result["request_id"]) == ("models", ids[0], "m1")
    assert http <= 2  # at most one each before the socket's first ack (a zero jitter)


async def test_a_dropped_socket_brings_the_http_heartbeat_at_once(tmp_path: Path) -> None:
    """The socket goes away: each runtime it kept alive beats over HTTP at once, not at its
    next (hourly) tick."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, control=True, **QUIET) as d,
    ):
        (runtime,) = fake.live_runtimes()
        await acked(d, runtime.id)
        before = len(fake.seen("heartbeat"))
        fake.close_control()
        await eventually(lambda: len(fake.seen("heartbeat")) == before + 1, within=10.0)
        assert fake.seen("heartbeat")[-1].body["runtime_id"] == runtime.id


async def test_a_runtime_gone_ack_registers_the_runtime_again(tmp_path: Path) -> None:
    """A runtime deleted on the server: the next ack says `runtime_gone`, the daemon registers
    again and heartbeats the new runtime on the socket. HTTP heartbeats fail here, so only the
    ack can have told it."""
    async with multica_server() as fake:
        fake.answer_raw("heartbeat", b'{"error": "unavailable"}', status=503)
        env = {**QUIET, "MULTICA_DAEMON_HEARTBEAT_INTERVAL": "300ms"}
        async with running_daemon(tmp_path, fake.url, control=True, **env) as d:
            (old,) = fake.live_runtimes()
            await acked(d, old.id)
            registers = len(fake.seen("register"))
            fake.delete_runtime(old.id)
            await eventually(lambda: len(fake.live_runtimes()) == 1, within=10.0)
            (new,) = fake.live_runtimes()
            assert new.id != old.id and len(fake.seen("register")) == registers + 1
            await acked(d, new.id)
            assert [r.id for r in d.worker.registration.runtimes] == [new.id]


async def test_claims_go_on_the_socket_with_answers_beyond_64_kib(tmp_path: Path) -> None:
    """Once an ack said `rpc-v1`, a task queued is claimed on the socket (`tasks.claim` with
    the HTTP claim's body and a 5 s budget), not over HTTP, though its claim answer is far
    larger than the 64 KiB a control frame could be; it runs once, to the end."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, control=True, **QUIET) as d,
    ):
        (runtime,) = fake.live_runtimes()
        await acked(d, runtime.id)
        http_claims = len(fake.seen("claim"))
        task_id = fake.queue_issue(description="x" * (512 * 1024))
        assert (await fake.finished(task_id, within=20.0)).status == "completed"
        assert len(fake.seen("claim")) == http_claims
        assert d.worker.claims.over_socket >= 1
        request = socket_claims(fake)[0]
        assert request["timeout_ms"] == 5000
        assert request["body"] == {
            "daemon_id": d.worker.daemon_id,
            "runtime_ids": [runtime.id],
            "max_tasks": d.settings.max_concurrent_tasks,
        }
        assert len(fake.seen("start")) == 1


async def test_a_lost_claim_answer_falls_back_to_http_after_the_window_and_runs_each_once(
    tmp_path: Path,
) -> None:
    """The server makes a claim on the socket and its answer is lost: no claim at all until
    the budget and grace have passed twice (the wait for the answer, then Go's safety
    window), then one over HTTP, which takes the task queued meanwhile; the lost task is
    handed out again once the server's recovery window passed. Each task starts once."""
    budget, grace = 0.3, 0.2
    async with multica_server() as fake:
        fake.claim_recovery, fake.prepare_lease = 1.5, 1.5
        env = {**QUIET, "MULTICA_DAEMON_POLL_INTERVAL": "500ms"}
        async with running_daemon(
            tmp_path, fake.url, control=True, claim_budget=budget, claim_grace=grace, **env
        ) as d:
            (runtime,) = fake.live_runtimes()
            await acked(d, runtime.id)
            fake.drop_answers("tasks.claim")
            lost = fake.queue_issue()
            await eventually(lambda: fake.tasks[lost].status == "dispatched")
            (lost_at,) = [f.at for f in fake.frames if f.route == "rpc_request"]
            http_before = len(fake.seen("claim"))
            later = fake.queue_issue()
            for task_id in (later, lost):
                assert (await fake.finished(task_id, within=20.0)).status == "completed"
    fallback = fake.seen("claim")[http_before]
    assert fallback.at - lost_at >= 2 * (budget + grace)
    # No claim of any kind went inside the window; the later task came by the HTTP claim.
    inside = [f for f in fake.frames if f.route == "rpc_request" and lost_at < f.at < fallback.at]
    assert inside == []
    assert fake.tasks[later].handed == ["http"]
    # Lost on the socket, then handed out again by a claim past the recovery window.
    assert fake.tasks[lost].handed[0] == "socket" and len(fake.tasks[lost].handed) == 2
    starts = [r.path.split("/")[-2] for r in fake.seen("start")]
    assert sorted(starts) == sorted([lost, later])


async def test_a_claim_the_socket_refuses_goes_over_http_at_once(tmp_path: Path) -> None:
    """A server whose socket answers requests 503 (no handler) claimed nothing: the claim
    goes over HTTP right away and the task runs."""
    async with multica_server() as fake:
        fake.rpc = False
        async with running_daemon(tmp_path, fake.url, control=True, **QUIET) as d:
            (runtime,) = fake.live_runtimes()
            await acked(d, runtime.id)
            http_claims = len(fake.seen("claim"))
            task_id = fake.queue_issue()
            assert (await fake.finished(task_id, within=20.0)).status == "completed"
            assert len(socket_claims(fake)) >= 1
            assert len(fake.seen("claim")) > http_claims
            assert d.worker.claims.over_socket == 0


async def test_a_server_without_socket_heartbeats_keeps_them_on_http(tmp_path: Path) -> None:
    """No acks (a server without the handler): HTTP heartbeats go on, claims stay on HTTP."""
    async with multica_server() as fake:
        fake.ws_heartbeats = False
        env = {**QUIET, "MULTICA_DAEMON_HEARTBEAT_INTERVAL": "200ms"}
        async with running_daemon(tmp_path, fake.url, control=True, **env) as d:
            channel = d.worker.pickup.channel
            assert channel is not None
            await channel.connected.wait()
            (runtime,) = fake.live_runtimes()
            await eventually(lambda: len(fake.seen("heartbeat")) >= 3)
            await eventually(lambda: socket_beats(fake, runtime.id) >= 3)
            assert not channel.calls.ready
            task_id = fake.queue_issue()
            assert (await fake.finished(task_id, within=20.0)).status == "completed"
            assert socket_claims(fake) == []
