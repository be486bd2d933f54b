"""The fakes' TCP listener: cancelled while a client is connecting, it leaves no socket behind."""

from __future__ import annotations

import gc
import socket
import warnings

import anyio
import pytest
from anyio.abc import SocketStream

from tests.fakes.tcp_listener import listening_socket, serve

pytestmark = pytest.mark.anyio


async def _close(stream: SocketStream) -> None:
    await stream.aclose()


async def test_a_cancel_in_the_iteration_a_client_arrives_leaves_nothing_unclosed() -> None:
    """The client's connect makes the socket readable; the cancel runs before the accept
    callback in that same loop iteration (anyio's listener accepted then, and dropped the
    socket with InvalidStateError: the chaos proxy's ResourceWarning)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(20):
            sock = listening_socket()
            with sock:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(serve, sock, _close, tg)
                    await anyio.wait_all_tasks_blocked()
                    with socket.create_connection(sock.getsockname()):
                        await anyio.lowlevel.checkpoint()  # the next select sees it readable
                        tg.cancel_scope.cancel()
        gc.collect()
    assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
