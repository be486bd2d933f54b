"""`agent-daemon status` and `check`: an operator's view of a running daemon's health port."""

from __future__ import annotations

import json
import sys
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TextIO

import anyio.to_thread
import httpx

from backends.acp.catalog import AGENTS
from daemon.addresses import is_loopback, join_host_port, split_host_port
from daemon.cli import port_owner
from daemon.logs import short_id
from daemon.ops.handles import LENGTH
from daemon.ops.health_access import CHALLENGE_PATH, proof_header
from daemon.protocol import jsonin
from daemon.times import format_duration
from daemon.workdirs.sizes import format_bytes

TIMEOUT = 2.0
"""Seconds each request may take: `check` makes two, within the 5 s a container check allows."""

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


class ProbeError(Exception):
    """The health port could not be asked; the message is the one line to print."""


def base_url(addr: str) -> str:
    """`http://host:port` for a health address; a wildcard listen address means loopback."""
    try:
        host, port = split_host_port(addr)
    except ValueError:
        raise ProbeError(f"bad health address {addr!r}: expected HOST:PORT") from None
    if port == 0:
        raise ProbeError(
            f"health address {addr!r} has port 0 (the daemon picked a free one and logged it): "
            "pass --addr HOST:PORT"
        )
    return f"http://{join_host_port(_WILDCARDS.get(host, host), port)}"


async def status(
    addr: str,
    *,
    as_json: bool = False,
    token: str = "",
    owners: Collection[int] = frozenset({0}),
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Print the daemon and its running tasks; 1 with one line on stderr when unreachable.

    With the daemon's `token` the health port names tasks and workspaces by their ids, else
    by handles. The token is never sent, nor anything a listener could use again: the port
    hands out a nonce and gets an HMAC of it (daemon/ops/health_access.py) — and only from a
    loopback port that root or one of `owners` holds (`--addr` may name another host, the port
    speaks plain HTTP, and a neighbour's port could relay the exchange).
    """
    out = out or sys.stdout
    try:
        base = base_url(addr)
        url = httpx.URL(base)
        shown = bool(token) and is_loopback(url.host)
        if shown:
            refused = await anyio.to_thread.run_sync(
                port_owner.refusal, url.host, url.port or 80, owners
            )
            if refused is not None:
                raise ProbeError(refused)
        async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as http:
            headers = await _proof(http, token) if shown else {}
            code, doc = await _get(http, "/health", headers)
        if code != 200:
            raise ProbeError(f"{base}/health answered HTTP {code}")
    except ProbeError as exc:
        print(f"agent-daemon: {exc}", file=err or sys.stderr)
        return 1
    print(json.dumps(doc, indent=2) if as_json else render(doc), file=out)
    return 0


async def _proof(http: httpx.AsyncClient, token: str) -> dict[str, str]:
    """The header proving `token` for one `GET /health`, over a nonce the port hands out; none
    from a daemon too old to hand one out (it then shows handles)."""
    code, answer = await _get(http, CHALLENGE_PATH)
    nonce = answer.get("nonce")
    if code != 200 or not isinstance(nonce, str) or not nonce.isalnum():
        return {}
    return {"Authorization": proof_header(token, nonce, "GET", "/health")}


async def check(addr: str, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """0 when `/healthz` and `/readyz` both answer 200; one line saying why, either way."""
    try:
        base = base_url(addr)
        async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as http:
            live_code, live = await _get(http, "/healthz")
            ready_code, ready = await _get(http, "/readyz")
    except ProbeError as exc:
        print(f"agent-daemon: {exc}", file=err or sys.stderr)
        return 1
    if live_code != 200:
        print(f"agent-daemon: not live: {_reason(live, live_code)}", file=err or sys.stderr)
        return 1
    if ready_code != 200:
        print(f"agent-daemon: not ready: {_reason(ready, ready_code)}", file=err or sys.stderr)
        return 1
    daemon_id = str(ready.get("daemon_id", ""))
    print(f"ok: live and ready (daemon {short_id(daemon_id)} on {base})", file=out or sys.stdout)
    if ready.get("agents_as_root"):
        # Healthy all the same: the operator chose it (or runs the local embedded server).
        print(
            "agent-daemon: warning: agents run as root and can read the daemon's token; "
            "set MULTICA_AGENT_USER",
            file=err or sys.stderr,
        )
    return 0


async def _get(
    http: httpx.AsyncClient, path: str, headers: Mapping[str, str] | None = None
) -> tuple[int, dict[str, Any]]:
    where = f"{http.base_url}".rstrip("/") + path
    try:
        response = await http.get(path, headers=headers)
    except httpx.ConnectError as exc:
        raise ProbeError(
            f"nothing answers on {http.base_url.host}:{http.base_url.port} "
            f"(is the daemon running?): {_cause(exc)}"
        ) from exc
    except httpx.TimeoutException as exc:
        raise ProbeError(f"no answer from {where} within {TIMEOUT:g}s") from exc
    except httpx.HTTPError as exc:
        raise ProbeError(f"cannot read {where}: {_cause(exc)}") from exc
    try:
        doc = jsonin.loads(response.content, what="the answer")
    except ValueError as exc:
        raise ProbeError(f"{where} answered HTTP {response.status_code} without JSON") from exc
    if not isinstance(doc, dict):
        raise ProbeError(f"{where} answered HTTP {response.status_code} with unexpected JSON")
    return response.status_code, doc


def _cause(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    # httpx wraps the OS error text ("[Errno 111] Connection refused"); keep its last words.
    return text.rsplit("] ", 1)[-1].lower()


def _reason(doc: Mapping[str, Any], code: int) -> str:
    return str(doc.get("reason") or doc.get("error") or f"HTTP {code}")


# --- the table --------------------------------------------------------------------------


def render(doc: Mapping[str, Any]) -> str:
    """The /health document as a few summary lines and a table of running tasks."""
    agents = ", ".join(_agent(a, doc.get("agent_versions") or {}) for a in doc.get("agents") or [])
    workspaces = ", ".join(
        f"{w.get('name') or w.get('id')} ({len(w.get('runtimes') or [])} runtimes)"
        for w in doc.get("workspaces") or []
    )
    lines = [
        f"agent-daemon {doc.get('cli_version', '?')}  {doc.get('status', '?')}  "
        f"pid {doc.get('pid', '?')}  up {doc.get('uptime', '?')}",
        f"daemon     {doc.get('daemon_id') or '-'} on {doc.get('device_name') or '-'}"
        + (f"  profile {doc['profile']}" if doc.get("profile") else ""),
        f"server     {doc.get('server_url') or '-'}  circuit {doc.get('server_circuit', '?')}  "
        f"outbox {doc.get('outbox_depth', 0)}",
        f"agents     {agents or '-'}" + ("  (as root)" if doc.get("agents_as_root") else ""),
        f"contained  {doc.get('containment') or '-'}",
        f"workspaces {workspaces or '-'}",
        f"tasks      {doc.get('active_task_count', 0)} active, "
        f"{doc.get('running_task_count', 0)} running, "
        f"{doc.get('max_concurrent_tasks', 0)} slots",
        f"disk       {_disk(doc.get('disk'))}",
    ]
    for held in doc.get("agent_users_held_back") or []:
        lines.append(f"held back  {held}")
    for failure in doc.get("provider_failures") or []:
        resets = f", resets {failure['resets']}" if failure.get("resets") else ""
        lines.append(
            f"provider   {failure.get('backend')}: {failure.get('reason')} at "
            f"{failure.get('at')}{resets}"
        )
    tasks = doc.get("tasks") or []
    if tasks:
        header = ("TASK", "BACKEND", "PID", "STARTED", "IDLE", "TOOLS IN FLIGHT", "WATCHDOG")
        lines += ["", *table(header, [_row(t) for t in tasks])]
    return "\n".join(lines)


def _disk(disk: Any) -> str:
    if not isinstance(disk, Mapping):
        return "- (measured at each GC round)"
    return (
        f"{disk.get('task_dirs', 0)} task dirs {_bytes(disk.get('task_bytes'))} "
        f"(artifacts {_bytes(disk.get('artifact_bytes'))}), "
        f"{disk.get('repo_caches', 0)} repo caches {_bytes(disk.get('repo_cache_bytes'))}"
        f"  at {disk.get('measured_at', '?')}"
    )


def _bytes(value: Any) -> str:
    return format_bytes(int(value)) if isinstance(value, int) else "?"


# The agents whose entries no test drives: an operator sees that next to the version.
_UNTESTED = frozenset(agent.name for agent in AGENTS if agent.untested)


def _agent(agent: Any, versions: Mapping[str, Any]) -> str:
    # A provider name (Multica's shape); an older daemon of ours listed {name, version}.
    if isinstance(agent, Mapping):
        return f"{agent.get('name')} {agent.get('version')}"
    said = f"{agent} {versions.get(str(agent), '?')}"
    return f"{said} (untested)" if agent in _UNTESTED else said


def _row(task: Mapping[str, Any]) -> tuple[str, ...]:
    tools = task.get("tools_in_flight") or []
    shown_tools = ", ".join(
        f"{t.get('name')} {t.get('call_id')} ({_seconds(t.get('running_for'))})" for t in tools
    )
    task_id = str(task.get("id", ""))
    return (
        # A handle (the view without the token) is short already; an id is shortened.
        task_id if len(task_id) <= LENGTH else short_id(task_id),
        str(task.get("backend", "")),
        str(task.get("pid") if task.get("pid") is not None else "-"),
        str(task.get("started_at", "")),
        _seconds(task.get("idle_seconds")),
        shown_tools or "-",
        _watchdog(task),
    )


def _watchdog(task: Mapping[str, Any]) -> str:
    threshold = task.get("threshold_seconds")
    fires_in = task.get("watchdog_fires_in_seconds")
    if not threshold or fires_in is None:
        return "off"
    scope = task.get("watchdog_scope") or ("tool" if task.get("tools_in_flight") else "idle")
    return f"{scope} {format_duration(float(threshold))}, fires in {_seconds(fires_in)}"


def _seconds(value: Any) -> str:
    if not isinstance(value, int | float):
        return "-"
    return format_duration(float(round(value)))


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Left-aligned columns as wide as their widest cell, two spaces apart."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]
