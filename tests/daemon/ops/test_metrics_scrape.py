"""`/metrics` scraped over real HTTP from a running daemon, parsed as Prometheus text."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import embedded_server, eventually, running_daemon, serving_daemon

pytestmark = pytest.mark.anyio

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(health_url: str) -> Samples:
    """Every sample of one scrape, keyed by name and labels."""
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.get(f"{health_url}/metrics")
    assert response.status_code == 200
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; a counter child that never moved is absent, which reads as 0."""
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_metrics_are_served_as_prometheus_text(tmp_path: Path) -> None:
    """The exposition has Prometheus' text content type and parses into the daemon's families."""
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(tmp_path, url, health=True) as d,
        httpx.AsyncClient(timeout=5) as http,
    ):
        response = await http.get(f"{d.health_url}/metrics")
    families = {f.name for f in text_string_to_metric_families(response.text)}
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert {"agent_daemon_tasks_finished", "agent_daemon_watchdog_fires"} <= families
    assert "agent_daemon_last_message_age_seconds" in families


async def test_counters_move_when_a_scripted_task_completes(tmp_path: Path) -> None:
    """A completed task adds one finished task and its messages by type."""
    script = {
        "steps": [
            {"text": "one"},
            {"text": "two"},
            {"tool": {"name": "Bash", "call_id": "c1", "seconds": 0, "output": "ok"}},
            {"text": "three"},
            {"result": {"output": "done"}},
        ]
    }
    finished = ("agent_daemon_tasks_finished_total", {"backend": "scripted", "status": "completed"})
    async with serving_daemon(tmp_path, health=True) as d:
        before = await scrape(d.health_url)
        task = await d.wait(await d.submit(script))

        async def counted() -> bool:
            after = await scrape(d.health_url)
            return value(after, finished[0], **finished[1], failure_reason="none") > 0

        await eventually(counted)
        after = await scrape(d.health_url)
    assert task["status"] == "completed"
    assert value(before, finished[0], **finished[1], failure_reason="none") == 0
    assert value(after, finished[0], **finished[1], failure_reason="none") == 1

    def moved(kind: str) -> float:
        name = "agent_daemon_backend_messages_total"
        return value(after, name, type=kind) - value(before, name, type=kind)

    assert moved("text") == 3
    assert (moved("tool_use"), moved("tool_result"), moved("result")) == (1, 1, 1)
    assert value(after, "agent_daemon_tasks_claimed_total", backend="scripted") == 1


async def test_watchdog_firing_counts_the_idle_scope_and_the_kill(tmp_path: Path) -> None:
    """A silent agent stopped by the idle watchdog moves watchdog_fires{idle} and process_kills."""
    script = {"steps": [{"text": "working"}, {"hang": True}]}
    async with serving_daemon(tmp_path, health=True, MULTICA_AGENT_IDLE_WATCHDOG="1s") as d:
        before = await scrape(d.health_url)
        task = await d.wait(await d.submit(script))

        async def counted() -> bool:
            samples = await scrape(d.health_url)
            return (
                value(
                    samples,
                    "agent_daemon_tasks_finished_total",
                    backend="scripted",
                    status="idle_watchdog",
                    failure_reason="idle_watchdog",
                )
                == 1
            )

        await eventually(counted)
        after = await scrape(d.health_url)
    assert task["failure_reason"] == "idle_watchdog"
    assert value(before, "agent_daemon_watchdog_fires_total", scope="idle") == 0
    assert value(after, "agent_daemon_watchdog_fires_total", scope="idle") == 1
    assert value(after, "agent_daemon_process_kills_total", signal="SIGTERM") >= 1
    assert value(after, "agent_daemon_watchdog_fires_total", scope="tool") == 0


async def test_last_message_age_grows_while_the_agent_is_silent(tmp_path: Path) -> None:
    """The loop tick keeps last_message_age_seconds fresh while no message arrives."""
    script = {"steps": [{"text": "thinking"}, {"sleep": 30}, {"result": {"output": "done"}}]}
    gauge = "agent_daemon_last_message_age_seconds"
    async with serving_daemon(
        tmp_path,
        health=True,
        MULTICA_AGENT_IDLE_WATCHDOG="0",
        MULTICA_DAEMON_SHUTDOWN_GRACE="100ms",
    ) as d:
        await d.submit(script)

        async def silent() -> bool:
            return value(await scrape(d.health_url), gauge) > 0

        await eventually(silent)
        first = value(await scrape(d.health_url), gauge)
        seen: list[float] = []

        async def grown() -> bool:
            seen.append(value(await scrape(d.health_url), gauge))
            return seen[-1] - first >= 1.0

        # The event is the gauge growing while nothing arrives; no fixed pause guesses when
        # the next tick has published it.
        await eventually(grown, within=15, what=f"{gauge} to grow by 1 s from {first}")
    assert seen[-1] < 30
