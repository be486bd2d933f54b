"""The status page's routes: what they serve, what they never show, whom they answer."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib
from pathlib import Path
from typing import Any

from daemon.ops.handles import task_handle
from daemon.ops.health import HealthServer
from daemon.ops.metrics import Metrics
from daemon.ops.page import PATHS
from daemon.snapshot import (
    ActivitySnapshot,
    AttemptSnapshot,
    DaemonSnapshot,
    FinishedSnapshot,
    ProviderFailure,
    RunSnapshot,
    ToolSnapshot,
    WatchdogSnapshot,
)
from tests.daemon.ops.snapshots import Clock

ROOT = Path(__file__).resolve().parents[3]
STATIC = ROOT / "daemon" / "ops" / "static"
TASK_ID = "6f1c2b4e-0d7a-4f8e-9a51-3c2d1e0f9b87"
DONE_ID = "0a9b8c7d-6e5f-4a3b-8c2d-1e0f9a8b7c6d"
LOCAL = {"host": "127.0.0.1:8181"}


def busy_snapshot(state: str = "in a tool") -> DaemonSnapshot:
    """A daemon with one task 4 s into a tool call (20 s window) and one that ended."""
    run = RunSnapshot(
        id=TASK_ID,
        backend="claude",
        started_wall=1.0,
        retry=1,
        attempt=AttemptSnapshot(pid=3987651, watchdog=WatchdogSnapshot("tool", 20.0)),
        activity=ActivitySnapshot(
            idle_seconds=4.0,
            tools_in_flight=(ToolSnapshot("Bash", "toolu_01SECRET", 4.0),),
            messages=9,
        ),
        state=state,
        resumes=1,
        transcript_lag=0.25,
    )
    done = FinishedSnapshot(
        id=DONE_ID,
        backend="codex",
        status="idle_watchdog",
        reason="idle_watchdog",
        started_wall=10.0,
        ended_wall=70.0,
        attempts=2,
        resumes=1,
        input_tokens=120,
        output_tokens=30,
    )
    return DaemonSnapshot(
        status="running",
        daemon_id="daemon-id-7",
        device_name="box",
        server_url="https://user:hunter2@multica.example",
        registered=True,
        max_concurrent_tasks=4,
        agents=(("claude", "2.1.0"), ("codex", "0.40.0")),
        workspaces=(("ws-secret-id", "Secret Workspace", ("runtime-secret-id",)),),
        profile="",
        server_circuit="open",
        outbox_depth=3,
        runs=(run,),
        provider_failures=(
            ProviderFailure("codex", "rate_limited", "2026-11-26T20:00:00Z", "in 2h", DONE_ID),
        ),
        finished=(done,),
    )


def served(snapshot: DaemonSnapshot, clock: Clock | None = None) -> HealthServer:
    """A health port (not listening) whose loop has published `snapshot` once."""
    server = HealthServer("127.0.0.1:0", Metrics(), clock=clock or Clock())
    server.attach(lambda: snapshot, lambda: None)
    return server


def page_json(server: HealthServer) -> dict[str, Any]:
    reply = server.route("GET", "/page.json", "127.0.0.1", LOCAL)
    assert reply.status == 200, reply.body
    doc: dict[str, Any] = json.loads(reply.body)
    return doc


def test_the_page_and_its_files_are_served_with_a_policy_that_allows_only_itself() -> None:
    """`/`, its script and its style answer 200 with their types and a same-origin-only CSP."""
    server = served(busy_snapshot())
    kinds = {"/": "text/html", "/page.js": "text/javascript", "/page.css": "text/css"}
    for path, kind in kinds.items():
        reply = server.route("GET", path, "127.0.0.1", LOCAL)
        assert reply.status == 200
        assert reply.content_type.startswith(kind)
        policy = dict(reply.headers)["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy
        assert "form-action 'none'" in policy and "frame-ancestors 'none'" in policy


def test_the_page_loads_only_its_own_routes() -> None:
    """Every file and URL the page refers to is one of its routes: nothing from elsewhere."""
    html = (STATIC / "index.html").read_text()
    script = (STATIC / "page.js").read_text()
    refs = re.findall(r'(?:src|href)="([^"]+)"', html) + re.findall(r'fetch\("([^"]+)"', script)
    # The icon is empty and inline: a browser asks for /favicon.ico without it.
    assert sorted(refs) == ["data:,", "page.css", "page.js", "page.json"]
    refs.remove("data:,")
    assert {f"/{ref}" for ref in refs} < set(PATHS)
    assert "http" not in html.replace('charset="utf-8"', "")


def test_the_wheel_ships_every_file_the_page_loads() -> None:
    """The package data globs in pyproject.toml cover each file under daemon/ops/static."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["daemon.ops"]
    for path in STATIC.iterdir():
        name = str(path.relative_to(STATIC.parent))
        assert any(fnmatch.fnmatch(name, g) for g in globs), f"{name} is not shipped"


def test_page_json_shows_no_id_token_path_or_tool_input() -> None:
    """Tasks go by label; no task, daemon, workspace, runtime or call id, no agent pid, no
    credentials of the server URL."""
    doc = page_json(served(busy_snapshot()))
    text = json.dumps(doc)
    for secret in (
        TASK_ID,
        DONE_ID,
        TASK_ID[:8],
        DONE_ID[:8],
        "daemon-id-7",
        "ws-secret-id",
        "Secret Workspace",
        "runtime-secret-id",
        "toolu_01SECRET",
        "3987651",
        "hunter2",
        "user:",
    ):
        assert secret not in text, secret
    assert doc["server"] == "https://multica.example"
    assert [r["label"] for r in doc["running"]] == [task_handle(TASK_ID)]
    assert [f["label"] for f in doc["finished"]] == [task_handle(DONE_ID)]


def test_page_json_says_what_each_running_task_is_doing_and_when_its_watchdog_fires() -> None:
    """State, tool in flight, idle time, the window that applies and the time left, the
    attempts and resumes — moved forward by the snapshot's age."""
    clock = Clock()
    server = served(busy_snapshot(), clock)
    clock.now += 2.0  # the snapshot is 2 s old when the page asks
    (run,) = page_json(server)["running"]
    assert run["state"] == "in a tool"
    assert run["tools"] == [{"name": "Bash", "running_seconds": 6.0}]
    assert run["idle_seconds"] == 6.0
    assert (run["window"], run["window_seconds"], run["fires_in_seconds"]) == ("tool", 20.0, 14.0)
    assert (run["attempts"], run["resumes"]) == (2, 1)
    assert run["transcript_lag_seconds"] == 0.25


def test_a_task_waiting_to_retry_has_no_countdown() -> None:
    """Between attempts no agent runs: nothing can fire, whatever the last window was."""
    (run,) = page_json(served(busy_snapshot(state="retrying")))["running"]
    assert run["state"] == "retrying"
    assert (run["window"], run["fires_in_seconds"]) == ("", None)


def test_page_json_shows_the_daemon_and_its_finished_tasks() -> None:
    """Circuit, outbox, slots, agents with versions, provider failures with their reset time,
    and each finished task's outcome, reason, duration and usage."""
    doc = page_json(served(busy_snapshot()))
    assert (doc["circuit"], doc["outbox_depth"], doc["slots"]) == (
        "open",
        3,
        {"used": 1, "total": 4},
    )
    assert doc["agents"] == [
        {"name": "claude", "version": "2.1.0"},
        {"name": "codex", "version": "0.40.0"},
    ]
    (failure,) = doc["provider_failures"]
    assert failure == {
        "backend": "codex",
        "reason": "rate_limited",
        "at": "2026-11-26T20:00:00Z",
        "resets": "in 2h",
    }
    (done,) = doc["finished"]
    assert (done["outcome"], done["reason"], done["duration_seconds"]) == (
        "idle_watchdog",
        "idle_watchdog",
        60.0,
    )
    assert (done["usage"]["input_tokens"], done["usage"]["output_tokens"]) == (120, 30)


def test_page_routes_keep_the_host_guard() -> None:
    """A DNS-rebinding page (its own host name) gets 403 from every page route."""
    server = served(busy_snapshot())
    for path in PATHS:
        reply = server.route("GET", path, "127.0.0.1", {"host": "evil.example:8181"})
        assert reply.status == 403, path


def test_page_routes_refuse_another_sites_origin() -> None:
    """A request from another site's page is refused; the page's own origin is answered."""
    server = served(busy_snapshot())
    for path in PATHS:
        other = {**LOCAL, "origin": "http://evil.example"}
        assert server.route("GET", path, "127.0.0.1", other).status == 403, path
        own = {**LOCAL, "origin": "http://127.0.0.1:8181"}
        assert server.route("GET", path, "127.0.0.1", own).status == 200, path


def test_the_page_cannot_act() -> None:
    """Only GET: a POST to any page route is 405, and the page's script never sends one."""
    server = served(busy_snapshot())
    for path in PATHS:
        assert server.route("POST", path, "127.0.0.1", LOCAL).status == 405, path
    script = (STATIC / "page.js").read_text()
    assert "method" not in script and "POST" not in script
