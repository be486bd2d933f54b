"""A transcript answer lost after the server stored the batch: never a seq stored twice on a
server that does not deduplicate, nothing lost on one that says it does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from daemon.ops.metrics import Metrics
from daemon.protocol.retry import RetryPolicy
from tests.fakes.chaos_proxy import chaos_proxy
from tests.fakes.multica_server import multica_server
from tests.helpers import embedded_server, eventually, running_daemon

pytestmark = pytest.mark.anyio

BURST = 5
BURSTS = 3
# Prints a burst of text lines, then waits for `go<k>` in its directory before the next one,
# so a test decides which batch meets the lost answer.
AGENT = f"""
import json, os, sys, time
here = sys.argv[1]
sys.stdin.read()
for burst in range({BURSTS}):
    if burst:
        while not os.path.exists(os.path.join(here, f"go{{burst}}")):
            time.sleep(0.02)
    for i in range({BURST}):
        print(json.dumps({{"type": "text", "content": f"burst {{burst}} line {{i}}"}}), flush=True)
print(json.dumps({{"type": "result", "output": "done"}}), flush=True)
"""
TOTAL = BURST * BURSTS


def bursting_agent(tmp_path: Path) -> dict[str, str]:
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    return {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": f"{agent} {tmp_path}"}


def go(tmp_path: Path, burst: int) -> None:
    (tmp_path / f"go{burst}").touch()


def unconfirmed(metrics: Metrics) -> float | None:
    name = "agent_daemon_transcript_messages_dropped_total"
    return metrics.registry.get_sample_value(name, {"reason": "unconfirmed"})


async def test_a_lost_answer_is_not_resent_to_a_server_that_stores_duplicates(
    tmp_path: Path,
) -> None:
    """Multica stores every message it gets: the batch whose answer was lost is given up and
    counted, so every (task, seq) is stored exactly once, the later batches too."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, **bursting_agent(tmp_path)) as d,
    ):
        fake.drop_answers("messages", 1)
        task_id = fake.queue_issue("issue-1", provider="command")
        await eventually(lambda: bool(fake.seen("messages")), within=20)
        go(tmp_path, 1)
        go(tmp_path, 2)
        await eventually(lambda: fake.tasks[task_id].status == "completed", within=30)
        given_up = unconfirmed(d.metrics)
    seqs = [m["seq"] for m in fake.messages_of(task_id)]
    first = [m["seq"] for m in fake.seen("messages")[0].body["messages"]]
    assert sorted(seqs) == list(range(1, TOTAL + 1))  # each once, the lost batch included
    assert first[0] == 1 and given_up == len(first)


async def test_a_lost_answer_is_resent_to_a_server_that_deduplicates(tmp_path: Path) -> None:
    """The embedded server says `X-Message-Dedupe: seq` (from its `register` answer on): the
    first batch, whose answer the proxy cuts, is sent again, and the transcript is seq 1..N
    exactly, nothing given up."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        chaos_proxy(url) as proxy,
        running_daemon(
            tmp_path, proxy.url, policy=RetryPolicy((0.1, 0.2)), **bursting_agent(tmp_path)
        ) as d,
    ):
        await proxy.set_mode("cut", only={"messages"})
        task_id = await d.submit("go", backend="command")
        await eventually(lambda: proxy.count("messages", mode="cut") > 0, within=20)
        await proxy.set_mode("pass")
        go(tmp_path, 1)
        go(tmp_path, 2)
        task = await d.wait(task_id)
        messages = await d.api.messages(task_id)
        given_up = unconfirmed(d.metrics)
    assert task["status"] == "completed"
    assert [m["seq"] for m in messages] == list(range(1, TOTAL + 1))
    assert messages[0]["content"] == "burst 0 line 0"
    assert given_up == 0
