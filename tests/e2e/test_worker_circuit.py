"""The worker's server circuit against a real server made to fail: claims pause, heartbeats don't.

Requests are counted where they arrive, at a chaos proxy in front of the embedded server.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from daemon.cli.tasks_api import TasksApi
from daemon.protocol.retry import RetryPolicy
from tests.fakes.chaos_proxy import ChaosProxy, chaos_proxy
from tests.helpers import RunningDaemon, embedded_server, eventually, running_daemon, server_client

pytestmark = pytest.mark.anyio

COOLDOWN = 2.0
# One try per call, so each failed request is one failure on the circuit.
ONE_TRY = RetryPolicy((), throttled_tries=1)
# Claims are asked for every 20 ms, so the probe goes out as soon as the cooldown ends (a
# heartbeat failing first would open the circuit again and only delay the probe). Heartbeats
# come every 700 ms, not a fraction of the cooldown: at 500 ms, a circuit opened by a failed
# heartbeat met the next failing heartbeat at the very end of each cooldown, again and again,
# and on a loaded machine that heartbeat could beat the probe every time.
FAST_POLL = {"MULTICA_DAEMON_POLL_INTERVAL": "20ms", "MULTICA_DAEMON_HEARTBEAT_INTERVAL": "700ms"}


@asynccontextmanager
async def opened_circuit(
    tmp_path: Path,
) -> AsyncIterator[tuple[RunningDaemon, ChaosProxy, TasksApi, float]]:
    """A daemon whose server answers 500 to everything until its circuit opened.

    Yields the daemon, the proxy, the task API straight to the server, and the monotonic time
    the circuit opened.
    """
    async with (
        embedded_server(tmp_path / "server.db") as url,
        chaos_proxy(url) as proxy,
        server_client(url) as direct,
        running_daemon(
            tmp_path, proxy.url, policy=ONE_TRY, circuit_cooldown=COOLDOWN, **FAST_POLL
        ) as d,
    ):
        circuit = d.worker.circuit
        await proxy.set_mode("500")
        await eventually(lambda: circuit.state == "open", within=10, every=0.005)
        opened = time.monotonic() + circuit.seconds_until_probe() - COOLDOWN
        yield d, proxy, TasksApi(direct), opened


async def sleep_until(moment: float) -> None:
    await anyio.sleep(max(0.0, moment - time.monotonic()))


async def test_no_claim_while_open_then_one_probe_per_cooldown(tmp_path: Path) -> None:
    """While the server keeps failing: no claim for a cooldown after opening, then at most one
    probe per cooldown, and at least one probe goes out."""
    async with opened_circuit(tmp_path) as (_, proxy, _, opened):
        await sleep_until(opened + 3 * COOLDOWN + 0.5)
    # A claim already on its way when the circuit opened may land just after it.
    claims = [t - opened for t in proxy.times("claim") if t > opened + 0.3]
    assert claims, "no probe claim after three cooldowns"
    assert min(claims) >= COOLDOWN - 0.05
    gaps = [later - earlier for earlier, later in itertools.pairwise(claims)]
    assert all(gap >= COOLDOWN - 0.1 for gap in gaps), claims


async def test_heartbeats_keep_going_while_open(tmp_path: Path) -> None:
    """Heartbeats are never held back by the open circuit (every 700 ms here)."""
    async with opened_circuit(tmp_path) as (d, proxy, _, opened):
        await sleep_until(opened + COOLDOWN)
        assert d.worker.circuit.state != "closed"
    beats = [t for t in proxy.times("heartbeat") if opened < t < opened + COOLDOWN]
    assert len(beats) >= 2


async def test_circuit_closes_and_claims_resume_once_the_server_answers(tmp_path: Path) -> None:
    """Back to passing through: the circuit closes and a new task is claimed and completed."""
    async with opened_circuit(tmp_path) as (d, proxy, api, _):
        await proxy.set_mode("pass")
        await eventually(lambda: d.worker.circuit.state == "closed", within=COOLDOWN + 5)
        script = {"steps": [{"text": "hi"}, {"result": {"output": "done"}}]}
        task_id = str((await api.create_task(json.dumps(script), backend="scripted"))["id"])
        task = await d.wait(task_id)
    assert task["status"] == "completed"
    assert proxy.count("claim", mode="pass") > 0
