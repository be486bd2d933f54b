"""What Multica's CLI reads of a daemon's health port, and what it prints then.

Built from `multica daemon stop` and `multica daemon status` (`server/cmd/multica/
cmd_daemon.go`, `runDaemonStop`, `runDaemonStatus`, `printDaemonStatusReport`,
`daemonAlive`, `checkDaemonHealthOnPort`):

- `GET /health` with a 2 s timeout; a refused connection, an error or an answer that is not a
  JSON object reads as `{"status": "stopped"}`;
- a daemon is alive only while `status` is `running` or `starting` (`daemon start` refuses to
  start a second one then, "already running");
- `daemon stop`: not alive → "Daemon is not running."; a `profile` that is not the CLI's → an
  error; else `POST /shutdown` (2 s timeout, any 2xx), "Stopping daemon (pid N)...", then up
  to ten polls half a second apart: the first that finds it not alive prints "Daemon
  stopped." (and the CLI removes its pid file); after ten, "Daemon is still stopping. It may
  be finishing a running task.";
- `daemon status`: `running` → a report of aligned `Key:  value` rows (the daemon's with its
  pid and uptime, `Version` from `cli_version`, `Managed by` from `launched_by`, `Restart
  pending` from `reload_pending_reason`, `Agents` joined, `Workspaces` counted); `starting` →
  "Daemon: starting (pid N)"; anything else → "Daemon: stopped".

The polls' pace is a parameter, so a test can take them faster than the CLI does.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx

ALIVE = ("running", "starting")
STILL_STOPPING = "Daemon is still stopping. It may be finishing a running task."


async def health(port: int) -> dict[str, Any]:
    """The health document as the CLI reads it (`stopped` when it cannot)."""
    try:
        async with httpx.AsyncClient(timeout=2.0) as http:
            doc = (await http.get(f"http://127.0.0.1:{port}/health")).json()
    except (httpx.HTTPError, ValueError):
        return {"status": "stopped"}
    return doc if isinstance(doc, dict) else {"status": "stopped"}


def alive(doc: dict[str, Any]) -> bool:
    return doc.get("status") in ALIVE


async def stop(port: int, *, profile: str = "", polls: int = 10, every: float = 0.5) -> list[str]:
    """`multica daemon stop`: the lines it prints."""
    doc = await health(port)
    if not alive(doc):
        return ["Daemon is not running."]
    if "profile" in doc and doc["profile"] != profile:
        raise AssertionError(f"the daemon on port {port} belongs to profile {doc['profile']!r}")
    pid = doc.get("pid")
    if not isinstance(pid, int | float) or not pid:
        raise AssertionError("could not determine daemon PID from health endpoint")
    async with httpx.AsyncClient(timeout=2.0) as http:
        answer = await http.post(f"http://127.0.0.1:{port}/shutdown")
    if not 200 <= answer.status_code < 300:
        raise AssertionError(f"graceful shutdown refused: {answer.status_code}; the CLI kills")
    lines = [f"Stopping daemon (pid {int(pid)})..."]
    for _ in range(polls):
        await anyio.sleep(every)
        if not alive(await health(port)):
            return [*lines, "Daemon stopped."]
    return [*lines, STILL_STOPPING]


async def status(port: int) -> list[str]:
    """`multica daemon status`: the lines it prints."""
    doc = await health(port)
    if doc.get("status") == "starting":
        return [f"Daemon: starting (pid {doc.get('pid')})"]
    if doc.get("status") != "running":
        return ["Daemon: stopped"]
    rows = [("Daemon", f"running (pid {doc.get('pid')}, uptime {doc.get('uptime')})")]
    for key, field in (
        ("Version", "cli_version"),
        ("Managed by", "launched_by"),
        ("Restart pending", "reload_pending_reason"),
    ):
        if isinstance(doc.get(field), str) and doc[field]:
            rows.append((key, doc[field]))
    if isinstance(doc.get("agents"), list) and doc["agents"]:
        rows.append(("Agents", ", ".join(map(str, doc["agents"]))))
    if isinstance(doc.get("workspaces"), list):
        rows.append(("Workspaces", str(len(doc["workspaces"]))))
    width = max(len(key) for key, _ in rows) + 1
    return [f"{key + ':':<{width}}  {value}" for key, value in rows]
