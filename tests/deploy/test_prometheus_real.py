"""A real Prometheus scrapes a running daemon with the shipped scrape config.

`deploy/prometheus/prometheus.yml` is changed only where a test must: the target (the daemon's
health port, on a free port), a 1 s scrape interval, and the rule file's absolute path (the
shipped alert rules load as they are). Prometheus keeps its data in a temporary directory and
is killed at the end. Skipped, with the reason, where `prometheus` is not installed
(`.ci/install-system-deps` installs it).
"""

from __future__ import annotations

import shutil
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import yaml

from tests.helpers import embedded_server, eventually, running_daemon

pytestmark = pytest.mark.anyio

PROMETHEUS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def scrape_config(health_url: str) -> dict[str, Any]:
    """The shipped config pointed at `health_url`, scraping every second."""
    config = yaml.safe_load((PROMETHEUS_DIR / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = "1s"
    config["global"]["evaluation_interval"] = "1s"
    config["rule_files"] = [str(PROMETHEUS_DIR / name) for name in config["rule_files"]]
    (job,) = config["scrape_configs"]
    job["static_configs"] = [{"targets": [health_url.removeprefix("http://")]}]
    return config


@pytest.fixture
def prometheus_binary() -> str:
    """The prometheus binary, or a skip. A fixture on purpose: a skip raised inside the test's
    task groups would arrive wrapped in an exception group, with a traceback and no reason."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("prometheus is not installed (.ci/install-system-deps installs it)")
    return binary


@asynccontextmanager
async def prometheus(
    binary: str, workdir: Path, config: dict[str, Any]
) -> AsyncIterator[httpx.AsyncClient]:
    """Prometheus on a free loopback port; yields a client of its HTTP API."""
    (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (workdir / "prometheus.log").open("wb")
    process = await anyio.open_process(
        [
            binary,
            f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=log,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as api:
            yield api
    finally:
        with anyio.CancelScope(shield=True):
            process.send_signal(signal.SIGTERM)
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
            log.close()


async def query(api: httpx.AsyncClient, promql: str) -> list[dict[str, Any]]:
    """The instant-query result vector, or [] while Prometheus is not answering yet."""
    try:
        response = await api.get("/api/v1/query", params={"query": promql})
    except httpx.TransportError:
        return []
    body = response.json()
    assert body["status"] == "success", body
    return list(body["data"]["result"])


async def test_prometheus_scrapes_the_daemon_and_sees_the_watchdog_fire(
    tmp_path: Path, prometheus_binary: str
) -> None:
    """With the shipped config: the target is up and the idle watchdog counter reads 1."""
    script = {"steps": [{"text": "working"}, {"hang": True}]}
    async with (
        embedded_server(tmp_path / "server.db") as url,
        running_daemon(tmp_path, url, health=True, MULTICA_AGENT_IDLE_WATCHDOG="1s") as d,
        prometheus(prometheus_binary, tmp_path, scrape_config(d.health_url)) as api,
    ):
        task = await d.wait(await d.submit(script))
        up: list[dict[str, Any]] = []
        fires: list[dict[str, Any]] = []

        async def target_up() -> bool:
            up[:] = await query(api, 'up{job="agent-daemon"}')
            return bool(up) and up[0]["value"][1] == "1"

        async def watchdog_seen() -> bool:
            fires[:] = await query(api, 'agent_daemon_watchdog_fires_total{scope="idle"}')
            return bool(fires)

        await eventually(target_up, within=20)
        await eventually(watchdog_seen, within=10)
        targets = (await api.get("/api/v1/targets")).json()["data"]["activeTargets"]
    assert task["failure_reason"] == "idle_watchdog"
    (target,) = targets
    assert target["health"] == "up"
    assert target["labels"]["job"] == "agent-daemon"
    assert target["scrapeUrl"] == f"{d.health_url}/metrics"
    assert fires[0]["metric"]["instance"] == d.health_url.removeprefix("http://")
    assert fires[0]["value"][1] == "1"
