"""Nothing is lost while the real server misbehaves: 500s, 429s, resets, then a minute down."""

from __future__ import annotations

import json
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import anyio
import pytest

from daemon.cli.tasks_api import TasksApi
from daemon.logs import short_id
from daemon.ops.metrics import DROP_REASONS
from daemon.protocol.retry import REPORT_DELAYS, RetryPolicy
from tests.fakes.chaos_proxy import ChaosProxy, Mode, chaos_proxy
from tests.helpers import (
    FINAL,
    RunningDaemon,
    daemon_env,
    daemon_process,
    embedded_server,
    eventually,
    running_daemon,
    server_client,
)

pytestmark = pytest.mark.anyio

TASKS = 20
SLOTS = 10
# Seconds each phase lasts once the first wave of tasks is running; "down" is the minute of
# refused connections the reliability contract names.
PHASES: tuple[tuple[Mode, float], ...] = (
    ("500", 4.0),
    ("429", 4.0),
    ("reset", 3.0),
    ("down", 60.0),
)
# The first wave ends before, inside and after the outage; the second wave is claimed while
# the server misbehaves or once it is back.
DURATIONS = (2, 5, 8, 12, 16, 25, 40, 55, 70, 80, 1, 2, 3, 4, 5, 2, 3, 4, 5, 6)


def task_script(index: int) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A script of 50–200 transcript messages (some tool calls) spread over its duration.

    Returns the script and the transcript it must produce, as (type, text) in `seq` order.
    """
    count = 50 + (index * 37) % 151
    duration = DURATIONS[index]
    chunks = 10
    steps: list[dict[str, Any]] = []
    expected: list[tuple[str, str]] = []
    emitted = 0
    for chunk in range(chunks):
        share = (count - emitted) // (chunks - chunk)
        if index % 3 == 0 and share >= 2:
            call = f"c{chunk}"
            command = f"step {chunk} of task {index}"
            steps.append(
                {
                    "tool": {
                        "name": "Bash",
                        "call_id": call,
                        "input": {"command": command},
                        "seconds": 0.05,
                        "output": f"ok {index}.{chunk}",
                    }
                }
            )
            expected += [("tool_use", command), ("tool_result", f"ok {index}.{chunk}")]
            share -= 2
            emitted += 2
        for _ in range(share):
            text = f"task {index} message {emitted + 1}"
            steps.append({"text": text})
            expected.append(("text", text))
            emitted += 1
        steps.append({"sleep": duration / chunks})
    steps.append({"result": {"output": f"done {index}"}})
    assert len(expected) == count
    return {"steps": steps}, expected


def stored_as(message: dict[str, Any]) -> tuple[str, str]:
    """A stored transcript message as (type, text), comparable with `task_script`'s list."""
    if message["type"] == "tool_use":
        return "tool_use", str((message.get("input") or {}).get("command"))
    if message["type"] == "tool_result":
        return "tool_result", str(message.get("output"))
    return str(message["type"]), str(message.get("content"))


def conflicting_seqs(proxy: ChaosProxy) -> list[tuple[str, int]]:
    """(task, seq) pairs the daemon sent more than once with different content."""
    sent: dict[tuple[str, int], set[str]] = defaultdict(set)
    for seen in proxy.requests(lambda s: s.endpoint == "messages" and bool(s.body)):
        task_id = seen.path.split("/")[4]
        for message in json.loads(seen.body)["messages"]:
            sent[(task_id, message["seq"])].add(json.dumps(message, sort_keys=True))
    return [key for key, bodies in sent.items() if len(bodies) > 1]


class Watch:
    """What the daemon went through, sampled while the chaos runs."""

    def __init__(self) -> None:
        self.circuit_states: set[str] = set()
        self.max_outbox = 0

    async def run(self, d: RunningDaemon) -> None:
        while True:
            self.circuit_states.add(d.worker.circuit.state)
            self.max_outbox = max(self.max_outbox, d.worker.outbox.depth())
            await anyio.sleep(0.1)


async def all_settled(api: TasksApi, d: RunningDaemon, ids: list[str]) -> list[dict[str, Any]]:
    """Every task terminal on the server and nothing left in the outbox."""
    with anyio.fail_after(120):
        while True:
            tasks = [await api.get_task(i) for i in ids]
            if all(t["status"] in FINAL for t in tasks) and d.worker.outbox.depth() == 0:
                return tasks
            await anyio.sleep(0.2)


@pytest.mark.timeout(300)
async def test_no_result_or_transcript_message_is_lost(tmp_path: Path) -> None:
    """20 tasks through 500s, 429s, resets and 60 s of refused connections: each ends with
    exactly one terminal report and its whole transcript, every seq once."""
    scripts = [task_script(i) for i in range(TASKS)]
    watch = Watch()
    async with (
        embedded_server(tmp_path / "server.db") as url,
        chaos_proxy(url) as proxy,
        server_client(url) as direct,
        running_daemon(
            tmp_path,
            proxy.url,
            policy=RetryPolicy((0.1, 0.2, 0.4)),
            report_policy=RetryPolicy((0.2, 0.4, 0.8, 1.6)),
            outbox_interval=1.0,
            MULTICA_DAEMON_MAX_CONCURRENT_TASKS=str(SLOTS),
        ) as d,
        anyio.create_task_group() as tg,
    ):
        api = TasksApi(direct)
        ids = [
            str((await api.create_task(json.dumps(s), backend="scripted"))["id"])
            for s, _ in scripts
        ]

        async def first_wave_running() -> bool:
            return len(await api.list_tasks(status="running")) >= SLOTS

        await eventually(first_wave_running, within=30)
        tg.start_soon(watch.run, d)
        begun = time.monotonic()
        for mode, seconds in PHASES:
            await proxy.set_mode(mode)
            await anyio.sleep(seconds)
        await proxy.set_mode("pass")
        tasks = await all_settled(api, d, ids)
        settled = time.monotonic() - begun
        transcripts = [await api.messages(i) for i in ids]
        tg.cancel_scope.cancel()
    print(f"chaos: settled {settled:.1f}s after the chaos began; {proxy.count()} requests")
    for task, (_, expected), messages in zip(tasks, scripts, transcripts, strict=True):
        assert task["status"] == "completed", task
        assert (task["complete_calls"], task["fail_calls"]) == (1, 0), task
        assert [m["seq"] for m in messages] == list(range(1, len(expected) + 1)), task["id"]
        assert [stored_as(m) for m in messages] == expected, task["id"]
    assert conflicting_seqs(proxy) == []
    for mode in ("500", "429", "reset"):
        assert proxy.count(mode=mode) > 0, mode
    # The outage was long enough to open the circuit and send reports to the outbox.
    assert "open" in watch.circuit_states
    assert watch.max_outbox > 0
    dropped = d.metrics.registry.get_sample_value
    name = "agent_daemon_transcript_messages_dropped_total"
    assert sum(dropped(name, {"reason": r}) or 0 for r in DROP_REASONS) == 0


GRACE = 2.0
UNBOUNDED = sum(REPORT_DELAYS)
"""How long the report policy's retries alone would keep a stop that ignored its budget."""


async def test_stopping_while_the_server_is_down_is_bounded_and_keeps_the_reports(
    tmp_path: Path,
) -> None:
    """SIGTERM with the server down: the daemon exits within the grace plus a few seconds (not
    the report policy's minutes), the outbox holds both reports and the unsent transcript, and
    the next start delivers them."""
    hanging = {"steps": [{"text": "working"}, {"hang": True}]}
    finishing = {
        "steps": [
            *({"text": f"early {i}"} for i in range(1, 31)),
            {"sleep": 1.5},
            *({"text": f"late {i}"} for i in range(1, 11)),
            {"result": {"output": "finished"}},
        ]
    }
    outbox = tmp_path / "state" / "outbox"
    async with (
        embedded_server(tmp_path / "server.db") as url,
        chaos_proxy(url) as proxy,
        server_client(url) as direct,
    ):
        api = TasksApi(direct)
        env = daemon_env(tmp_path, proxy.url, MULTICA_DAEMON_SHUTDOWN_GRACE=f"{GRACE:.0f}s")
        log = tmp_path / "daemon.log"
        async with daemon_process(env, log=log) as proc:
            hung = str((await api.create_task(json.dumps(hanging), backend="scripted"))["id"])
            done = str((await api.create_task(json.dumps(finishing), backend="scripted"))["id"])

            async def both_running() -> bool:
                return len(await api.list_tasks(status="running")) == 2

            await eventually(both_running, within=20)
            await proxy.set_mode("down")
            await eventually(
                lambda: f"transcript {short_id(done)}: 40 messages kept" in log.read_text(),
                within=30,
                what="`finishing` to say all 40 lines while nothing answers",
            )
            proc.send_signal(signal.SIGTERM)
            begun = time.monotonic()
            with anyio.fail_after(2 * UNBOUNDED):
                code = await proc.wait()
            took = time.monotonic() - begun
        kept = {p.stem: json.loads(p.read_text()) for p in outbox.glob("*.json")}
        await proxy.set_mode("pass")
        async with daemon_process(env) as again:

            async def delivered() -> bool:
                tasks = [await api.get_task(i) for i in (hung, done)]
                return all(t["status"] in FINAL for t in tasks) and not any(outbox.iterdir())

            await eventually(delivered, within=30)
            again.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                await again.wait()
        finished, cancelled = await api.get_task(done), await api.get_task(hung)
        transcript = await api.messages(done)
    print(f"stopped {took:.1f}s after SIGTERM with the server down (grace {GRACE:.0f}s)")
    assert code == 0
    # The stop is bounded by the grace, the agent's kill grace, the final flush, the report and
    # the deregister (about 10 s in all, each step shown on a fake clock in
    # test_shutdown_budget.py); a loaded machine has taken 12.9 s. What this shows is that the
    # report policy's minutes of retries were not waited out: half of them is the safety net.
    assert took < UNBOUNDED / 2
    assert {k: v["report"]["kind"] for k, v in kept.items()} == {done: "complete", hung: "fail"}
    assert kept[hung]["report"]["failure_reason"] == "cancelled"
    assert [m["content"] for m in kept[done]["messages"]][-10:] == [
        f"late {i}" for i in range(1, 11)
    ]
    assert (finished["status"], finished["output"], finished["complete_calls"]) == (
        "completed",
        "finished",
        1,
    )
    assert (cancelled["status"], cancelled["failure_reason"], cancelled["fail_calls"]) == (
        "failed",
        "cancelled",
        1,
    )
    assert [m["seq"] for m in transcript] == list(range(1, 41))
