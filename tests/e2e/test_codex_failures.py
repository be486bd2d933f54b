"""The real Codex CLI meeting the API's limits, through the daemon, against the
Multica-faithful server: the reason sent, the reset time the CLI names, and the daemon's own
view of it (metric, log line, `status`). One daemon serves every case in turn."""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.cli.status_view import render
from tests.fakes.multica_server import multica_server
from tests.fakes.openai_api import (
    NO_QUOTA,
    RATE_LIMITED,
    codex_env,
    codex_home,
    fake_openai,
    usage_limit,
)
from tests.fakes.real_cli import InstalledCli
from tests.helpers import eventually, running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

QUOTA = "agent_error.provider_quota_limit"
# Codex says when a limit lifts as a clock time, with the date when that is another day (a
# limit hit after 23:00 that lifts in an hour: "Nov 27th, 2026 12:04 AM").
CLOCK_TIME = re.compile(r"^(?:[A-Z][a-z]{2} \d{1,2}(?:st|nd|rd|th), \d{4} )?\d{1,2}:\d{2} [AP]M$")


@pytest.mark.parametrize("mode", ["exec", "app-server"])
async def test_rate_limit_and_quotas_are_named_with_when_they_lift(
    codex_cli: InstalledCli, tmp_path: Path, caplog: pytest.LogCaptureFixture, mode: str
) -> None:
    """429, insufficient_quota and a plan's usage limit, in either Codex mode: each `fail`
    names its reason with the session; the usage limit's reset time reaches the log, the
    metric and `status`."""
    script = [RATE_LIMITED, NO_QUOTA, usage_limit(int(time.time()) + 3600)]
    caplog.set_level(logging.WARNING, "daemon.ops.provider_failures")
    async with fake_openai(script) as api, multica_server() as fake:
        env = codex_env(tmp_path / "home", codex_home(tmp_path / "codex-home", api.url))
        async with running_daemon(
            tmp_path,
            fake.url,
            base_env=env,
            health=True,
            MULTICA_CODEX_PATH=codex_cli.path,
            MULTICA_CODEX_MODE=mode,
            MULTICA_SCRIPTED_BACKEND="0",
        ) as d:
            tasks = [await fake.finished(fake.queue_issue(provider="codex")) for _ in script]
            doc: dict[str, Any] = {}
            async with httpx.AsyncClient(base_url=d.health_url) as probe:

                async def reset_shown() -> bool:
                    # The server hears the report before the worker notes the ending, and the
                    # health port shows the worker's last published picture.
                    doc.update((await probe.get("/health")).json())
                    return any(f["resets"] for f in doc["provider_failures"])

                await eventually(reset_shown)
            failures = d.metrics.provider_failures
    reasons = [b["failure_reason"] for b in (r.body for r in fake.seen("fail"))]
    assert reasons == ["agent_error.provider_capacity_or_rate_limit", QUOTA, QUOTA]
    assert all(t.status == "failed" and t.session_id for t in tasks)
    assert all(b["session_id"] and b["work_dir"] for b in (r.body for r in fake.seen("fail")))
    assert "usage limit" in tasks[2].error  # the agent's own words stay in the error
    (last,) = doc["provider_failures"]
    assert (last["backend"], last["reason"]) == ("codex", QUOTA)
    assert CLOCK_TIME.match(last["resets"]), last
    assert f"provider   codex: {QUOTA} at {last['at']}, resets {last['resets']}" in render(doc)
    assert failures.labels("codex", QUOTA)._value.get() == 2
    logged = [r.getMessage() for r in caplog.records]
    assert any(f"reason={QUOTA} resets='{last['resets']}'" in line for line in logged)
