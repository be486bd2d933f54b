"""The full view's proof: a nonce of the port's own, good once and briefly, for one request;
and who holds a loopback port, read from the kernel's socket tables."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import httpx
import pytest

from daemon.cli.port_owner import expected_owners, listeners, refusal
from daemon.ops.health_access import (
    CHALLENGE_PATH,
    Challenges,
    proof_header,
    proves_token,
)
from daemon.testing import FakeClock
from tests.helpers import serving_daemon

pytestmark = pytest.mark.anyio

TOKEN = "the-daemons-token"


def _proves(header: str, challenges: Challenges, path: str = "/health") -> bool:
    return proves_token({"authorization": header}, TOKEN, challenges, "GET", path)


def test_a_proof_is_good_once_for_its_own_request() -> None:
    """A nonce the port issued proves the token once; again, for another path, with another
    token or never issued, it proves nothing."""
    challenges = Challenges()
    nonce = challenges.issue()
    assert _proves(proof_header(TOKEN, nonce, "GET", "/health"), challenges)
    assert not _proves(proof_header(TOKEN, nonce, "GET", "/health"), challenges)
    other = challenges.issue()
    assert not _proves(proof_header(TOKEN, other, "GET", "/metrics"), challenges)
    third = challenges.issue()
    assert not _proves(proof_header("another-token", third, "GET", "/health"), challenges)
    assert not _proves(proof_header(TOKEN, "f" * 32, "GET", "/health"), challenges)


def test_a_nonce_expires_and_a_flood_keeps_only_the_newest() -> None:
    """Past its ttl a nonce proves nothing; past the limit, the oldest go first."""
    clock = FakeClock()
    challenges = Challenges(ttl=10.0, limit=3, clock=clock)
    late = challenges.issue()
    clock.advance(10.5)
    assert not _proves(proof_header(TOKEN, late, "GET", "/health"), challenges)
    oldest, *newest = [challenges.issue() for _ in range(4)]
    assert not _proves(proof_header(TOKEN, oldest, "GET", "/health"), challenges)
    assert all(_proves(proof_header(TOKEN, n, "GET", "/health"), challenges) for n in newest)


async def test_the_port_shows_ids_to_a_proof_and_to_the_token_only(tmp_path: Path) -> None:
    """Over HTTP: a proof over the port's nonce and the bearer token read ids; the same proof
    sent again reads handles."""
    async with serving_daemon(tmp_path, health=True) as d:
        token = d.settings.token
        (workspace,) = d.worker.workspaces
        async with httpx.AsyncClient(base_url=d.health_url, timeout=5) as http:
            nonce = (await http.get(CHALLENGE_PATH)).json()["nonce"]
            header = {"Authorization": proof_header(token, nonce, "GET", "/health")}
            proved = (await http.get("/health", headers=header)).json()
            again = (await http.get("/health", headers=header)).json()
            bearer = {"Authorization": f"Bearer {token}"}
            with_token = (await http.get("/health", headers=bearer)).json()
    assert proved["workspaces"][0]["id"] == workspace["id"] == with_token["workspaces"][0]["id"]
    assert again["workspaces"][0]["id"] != workspace["id"]


def test_a_listener_is_found_with_its_owner_on_its_address_or_a_wildcard() -> None:
    """A socket listening on 127.0.0.1 or on 0.0.0.0 is found for 127.0.0.1 with this user's
    uid; one bound but not listening is not."""
    me = os.geteuid()
    for bound in ("127.0.0.1", "0.0.0.0"):
        with socket.socket() as sock:
            sock.bind((bound, 0))
            sock.listen()
            port = sock.getsockname()[1]
            assert listeners("127.0.0.1", port) == [me]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening
        assert listeners("127.0.0.1", port) == []


def test_the_tables_are_read_as_the_kernel_writes_them(tmp_path: Path) -> None:
    """A `/proc/net/tcp6` line for `::1` and for the wildcard `::`, each with its uid."""
    table = tmp_path / "tcp6"
    header = "  sl  local_address                         remote_address  st ... uid\n"
    # The kernel prints each 32-bit word of the address as a number in host byte order.
    words = struct.unpack("=4I", socket.inet_pton(socket.AF_INET6, "::1"))
    loopback = "".join(f"{word:08X}" for word in words)
    wildcard = "0" * 32
    tail = "00000000:00000000 00:00000000 00000000"
    rows = [
        f"   0: {loopback}:4C4A {wildcard}:0000 0A {tail}  1001 0 1",
        f"   1: {wildcard}:4C4A {wildcard}:0000 0A {tail}  1002 0 2",
        f"   2: {loopback}:4C4B {wildcard}:0000 0A {tail}  1003 0 3",
        f"   3: {loopback}:4C4A {wildcard}:0000 01 {tail}  1004 0 4",
    ]
    table.write_text(header + "\n".join(rows) + "\n")
    assert listeners("::1", 0x4C4A, tables=[table]) == [1001, 1002]
    assert listeners("::1", 0x4C4A, tables=[tmp_path / "none"]) is None


def test_a_port_another_user_holds_is_refused_naming_its_uid(tmp_path: Path) -> None:
    """Held by a uid outside the daemon's users: refused with that uid; held by one of them:
    no refusal; the state directory's owner is one of them."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        me = os.geteuid()
        assert refusal("127.0.0.1", port, {me}) is None
        said = refusal("127.0.0.1", port, {me + 1})
        assert said == (
            f"127.0.0.1:{port} is held by uid {me}, not the daemon's user (uid {me + 1}): "
            "not asking it"
        )
    assert refusal("127.0.0.1", port, {me}) == (
        f"nothing answers on 127.0.0.1:{port} (is the daemon running?)"
    )
    assert os.stat(tmp_path).st_uid in expected_owners(tmp_path)
    assert 0 in expected_owners(tmp_path / "missing")
