"""`agent-daemon submit`: create a task, and with `--wait` print its transcript to the end."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import httpx

import daemon
from daemon.cli.tasks_api import TasksApi
from daemon.config import Settings
from daemon.errors import DaemonError
from daemon.protocol.client import make_http_client
from daemon.protocol.models import TERMINAL_STATUSES
from daemon.server.token import TOKEN_FILE, read_token

QUEUED_NOTICE = 5.0
"""Seconds `submit --wait` watches a task stay queued before saying what it waits for."""


async def submit(settings: Settings, args: argparse.Namespace) -> int:
    """Create a task; with --wait print its transcript as it arrives and exit 0 on completion."""
    url, token = settings.server_url, settings.token
    if not url:
        url = f"http://{settings.embedded_listen}"
        # The embedded server's own token, which `run` or `server` generated on first start.
        token = settings.embedded_token or read_token(settings.state_dir / TOKEN_FILE)
        if not token:
            print(
                f"agent-daemon: no server token in {settings.state_dir / TOKEN_FILE}: start "
                "`agent-daemon run` (or `agent-daemon server`) first, or set MULTICA_DAEMON_TOKEN",
                file=sys.stderr,
            )
            return 1
    async with make_http_client(url, token, daemon.__version__) as http:
        api = TasksApi(http)
        try:
            task = await api.create_task(args.prompt, backend=args.backend, repos=args.repo)
        except (httpx.HTTPError, DaemonError) as exc:
            print(f"agent-daemon: cannot submit to {url}: {exc}", file=sys.stderr)
            return 1
        print(f"task {task['id']} queued", flush=True)
        if not args.wait:
            return 0
        return await _follow(api, task["id"])


async def _follow(api: TasksApi, task_id: str) -> int:
    after = 0
    waited = 0.0
    while True:
        task = await api.get_task(task_id)
        if task["status"] == "queued" and waited <= QUEUED_NOTICE < waited + 0.5:
            # No daemon serving the backend has come yet (the server refuses a task for a
            # backend that other online daemons lack): say what the wait is for.
            wanted = f"backend {task['backend']}" if task["backend"] else "any backend"
            print(f"task {task_id} still queued: waiting for a daemon serving {wanted}", flush=True)
        waited += 0.5
        for message in await api.messages(task_id, after_seq=after):
            after = max(after, int(message["seq"]))
            print(_render(message), flush=True)
        if task["status"] in TERMINAL_STATUSES:
            # One more read: messages sent just before the terminal report.
            for message in await api.messages(task_id, after_seq=after):
                print(_render(message), flush=True)
            break
        await anyio.sleep(0.5)
    print(f"task {task_id} {task['status']}", flush=True)
    if task.get("usage"):
        print(usage_line(task["usage"]), flush=True)
    if task.get("output"):
        print(task["output"], flush=True)
    if task.get("error"):
        reason = task.get("failure_reason") or "error"
        print(f"{reason}: {task['error']}", file=sys.stderr, flush=True)
    return 0 if task["status"] == "completed" else 1


def usage_line(usage: list[dict[str, Any]]) -> str:
    """What a task cost, on one line: its tokens by kind, then the models that spent them."""
    kinds = ("input", "output", "cache_read", "cache_write")
    totals = {k: sum(int(e.get(f"{k}_tokens") or 0) for e in usage) for k in kinds}
    models = ", ".join(f"{e.get('provider')}/{e.get('model')}" for e in usage)
    spent = ", ".join(f"{totals[k]} {k.replace('_', ' ')}" for k in kinds)
    return f"tokens: {spent} ({models})"


def _render(message: dict[str, object]) -> str:
    kind = message.get("type")
    if kind == "tool_use":
        return f"[tool_use {message.get('tool')}] {json.dumps(message.get('input'))}"
    if kind == "tool_result":
        return f"[tool_result] {message.get('output')}"
    return f"[{kind}] {message.get('content')}"
