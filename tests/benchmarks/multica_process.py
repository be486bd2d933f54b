"""The Multica-faithful fake server (tests/fakes/multica_server.py) in a process of its own.

Run: `python -m tests.benchmarks.multica_process PORT [HOST [CERT KEY]]`. It serves the fake's
daemon routes as they are (no `X-Task-Status`, no `(task, seq)` dedupe) on HOST:PORT (default
127.0.0.1; over TLS with the PEM files CERT and KEY), stamps every stored message with the
wall-clock time it was stored (`stored_at`), counts every daemon request by endpoint (the
path's last part that is not an id; `/404` added to those no route answers), and adds the few
routes a benchmark drives it with:

    POST /bench/queue    {"count": N, "message": "...", "provider": "command"} → task ids
    POST /bench/cancel   {"ids": [...]} → cancels them now; their cancel-acks are timed
    GET  /bench/tasks    {id: {"status", "cancelled_at", "acked_at"}}
    GET  /bench/messages {id: [[seq, content, stored_at], ...]} (duplicates included)
    GET  /bench/runtimes the number of live runtimes
    GET  /bench/providers the providers of the live runtimes
    GET  /bench/requests {endpoint: requests so far}
"""

from __future__ import annotations

import re
import sys
import time
from collections import Counter
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.types import Receive, Scope, Send

from tests.fakes.multica_server import MulticaFake


class _Stamped(list[dict[str, Any]]):
    """The fake's message rows, each stamped with when it was stored."""

    def extend(self, rows: Any) -> None:
        now = time.time()
        super().extend({**row, "stored_at": now} for row in rows)


_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def endpoint_of(path: str) -> str:
    """The endpoint a request counts under: its path's last part that is not an id."""
    parts = [part for part in path.split("/") if part and not _ID.match(part)]
    return parts[-1] if parts else "/"


class _Timed:
    """Counts each request by endpoint and records the time of each task's first cancel-ack,
    then lets the fake answer it."""

    def __init__(self, fake: MulticaFake, acked: dict[str, float], seen: Counter[str]) -> None:
        self.app = fake.app
        self.acked = acked
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        endpoint = endpoint_of(path)
        self.seen[endpoint] += 1
        if path.endswith("/cancel-ack"):
            self.acked.setdefault(path.split("/")[-2], time.time())

        async def counted(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] == 404:
                self.seen[f"{endpoint}/404"] += 1
            await send(message)

        await self.app(scope, receive, counted)


def bench_app(fake: MulticaFake) -> Starlette:
    """The fake's routes, plus the benchmark's own under /bench."""
    cancelled: dict[str, float] = {}
    acked: dict[str, float] = {}
    seen: Counter[str] = Counter()
    fake.messages = _Stamped()

    async def queue(request: Request) -> JSONResponse:
        body = await request.json()
        ids = [
            fake.queue_chat(body["message"], provider=body.get("provider", "command"))
            for _ in range(int(body["count"]))
        ]
        return JSONResponse(ids)

    async def cancel(request: Request) -> JSONResponse:
        for task_id in (await request.json())["ids"]:
            fake.cancel(task_id)
            cancelled[task_id] = time.time()
        return JSONResponse({"status": "ok"})

    async def tasks(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                t.id: {
                    "status": t.status,
                    "cancelled_at": cancelled.get(t.id),
                    "acked_at": acked.get(t.id),
                }
                for t in fake.tasks.values()
            }
        )

    async def messages(request: Request) -> JSONResponse:
        rows: dict[str, list[Any]] = {}
        for m in fake.messages:
            rows.setdefault(m["task_id"], []).append([m["seq"], m["content"], m["stored_at"]])
        return JSONResponse(rows)

    async def runtimes(request: Request) -> JSONResponse:
        return JSONResponse(len(fake.live_runtimes()))

    async def providers(request: Request) -> JSONResponse:
        return JSONResponse(sorted({r.provider for r in fake.live_runtimes()}))

    async def requests(request: Request) -> JSONResponse:
        return JSONResponse(dict(seen))

    routes = [
        Route("/bench/queue", queue, methods=["POST"]),
        Route("/bench/cancel", cancel, methods=["POST"]),
        Route("/bench/tasks", tasks, methods=["GET"]),
        Route("/bench/messages", messages, methods=["GET"]),
        Route("/bench/runtimes", runtimes, methods=["GET"]),
        Route("/bench/providers", providers, methods=["GET"]),
        Route("/bench/requests", requests, methods=["GET"]),
        Mount("/", app=_Timed(fake, acked, seen)),
    ]
    return Starlette(routes=routes)


def main() -> None:
    fake = MulticaFake()
    # The fake keeps every request and control frame it read, for tests; a benchmark's
    # hundreds a second would only grow its memory.
    fake.requests = _Forgetful()
    fake.frames = _Forgetful()
    host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"
    cert, key = sys.argv[3:5] if len(sys.argv) > 4 else (None, None)
    uvicorn.run(
        bench_app(fake),
        host=host,
        port=int(sys.argv[1]),
        ssl_certfile=cert,
        ssl_keyfile=key,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


class _Forgetful(list[Any]):
    """A request log that keeps nothing."""

    def append(self, item: Any) -> None:
        del item


if __name__ == "__main__":
    main()
