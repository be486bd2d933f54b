"""A TCP proxy that puts a round trip between a client and a server on the same machine, for the
load benchmark's remote server (`--delay`).

Run: `python -m tests.benchmarks.delay_proxy LISTEN_PORT UPSTREAM_PORT RTT_MS`. Every chunk
read from one side is written to the other half the round trip after it was read, in order
(latency, not bandwidth: nothing is held back for the chunks before it beyond their own
time). The TCP handshake the proxy answers at once is paid for on the first bytes a client
sends: they reach the server a round trip and a half after the connection was accepted, as
after a real SYN, SYN-ACK, ACK. TLS passes through untouched (the server terminates it).

Written because `tc netem` needs the sch_netem kernel module, which a kernel without modules
may not have.
"""

from __future__ import annotations

import math
import sys

import anyio
from anyio.abc import SocketStream
from anyio.streams.memory import MemoryObjectReceiveStream

CHUNK = 65536


async def _relay(
    source: SocketStream, target: SocketStream, delay: float, first_due: float
) -> None:
    """Copy `source` to `target`, each chunk `delay` seconds after it was read (the first
    not before `first_due`); close `target`'s sending side after the last."""
    send, receive = anyio.create_memory_object_stream[tuple[float, bytes]](math.inf)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_deliver, receive, target)
        async with send:
            try:
                while True:
                    data = await source.receive(CHUNK)
                    due = max(anyio.current_time() + delay, first_due)
                    send.send_nowait((due, data))
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass


async def _deliver(
    receive: MemoryObjectReceiveStream[tuple[float, bytes]], target: SocketStream
) -> None:
    async with receive:
        try:
            async for due, data in receive:
                wait = due - anyio.current_time()
                if wait > 0:
                    await anyio.sleep(wait)
                await target.send(data)
            await target.send_eof()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass


async def _serve(listen: int, upstream: int, rtt: float) -> None:
    async def handle(client: SocketStream) -> None:
        accepted = anyio.current_time()
        async with client:
            try:
                server = await anyio.connect_tcp("127.0.0.1", upstream)
            except OSError:
                return
            async with server, anyio.create_task_group() as tg:
                tg.start_soon(_relay, client, server, rtt / 2, accepted + 1.5 * rtt)
                tg.start_soon(_relay, server, client, rtt / 2, 0.0)

    listener = await anyio.create_tcp_listener(
        local_host="127.0.0.1", local_port=listen, backlog=4096
    )
    await listener.serve(handle)


def main() -> None:
    listen, upstream, rtt_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    anyio.run(_serve, listen, upstream, rtt_ms / 1000)


if __name__ == "__main__":
    main()
