"""A health port in a process limited to 64 file descriptors: prints its port, serves until TERM.

The connection cap is set above the limit on purpose, so a flood reaches `accept` failing
with EMFILE (the test in test_health_guard.py drives it).
"""

from __future__ import annotations

import logging
import resource
import signal
import sys

import anyio

from daemon.ops.health import HealthServer
from daemon.ops.metrics import Metrics


async def main() -> None:
    server = HealthServer("127.0.0.1:0", Metrics(), max_connections=1000, request_deadline=60)
    # Everything this process does once its port is announced must already be in memory: the
    # flood then holds every descriptor, and anyio imports its parts on first use (a module
    # file it cannot open ends the process). So the signal receiver is open before; the
    # worker threads' module, which the port's shutdown uses, health.py imports itself.
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async with anyio.create_task_group() as tg:
            port = await tg.start(server.serve)
            print(port, flush=True)
            async for _ in signals:
                break
            tg.cancel_scope.cancel()


if __name__ == "__main__":
    logging.basicConfig(stream=sys.stderr, level=logging.INFO)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
    anyio.run(main)
    sys.exit(3)
