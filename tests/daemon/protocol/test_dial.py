"""Opening a TCP connection (daemon/protocol/dial.py): the order addresses are tried in, and a
refusal in asyncio's words."""

from __future__ import annotations

import socket
import threading

import pytest

from daemon.protocol.dial import _interleaved, dial


def _info(family: socket.AddressFamily, host: str) -> tuple[object, ...]:
    return (family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, 443))


def test_the_families_take_turns_each_in_the_resolvers_order() -> None:
    six_a, six_b = _info(socket.AF_INET6, "::a"), _info(socket.AF_INET6, "::b")
    four_a, four_b, four_c = (_info(socket.AF_INET, f"10.0.0.{i}") for i in (1, 2, 3))
    ordered = _interleaved([six_a, six_b, four_a, four_b, four_c])
    assert ordered == [six_a, four_a, six_b, four_b, four_c]
    assert _interleaved([]) == []


@pytest.mark.anyio
async def test_a_refused_port_is_an_oserror_naming_the_address() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConnectionRefusedError, match=f"Connect call failed .*{port}"):
        await dial("127.0.0.1", port)


@pytest.mark.anyio
async def test_the_socket_handed_back_is_connected() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        sock = await dial("127.0.0.1", listener.getsockname()[1])
        with sock:
            assert sock.getpeername() == listener.getsockname()
            assert not sock.getblocking()


@pytest.mark.anyio
async def test_an_address_written_as_one_needs_no_resolver_thread() -> None:
    """`127.0.0.1` is connected to from the event loop's own thread: a name's look-up runs in
    a worker thread, which a daemon's first connection would otherwise start for nothing."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        before = {thread.ident for thread in threading.enumerate()}
        with await dial("127.0.0.1", listener.getsockname()[1]):
            started = [t.name for t in threading.enumerate() if t.ident not in before]
    assert started == []
