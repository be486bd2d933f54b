"""A remote MCP endpoint's checks, and a schema's digest as Multica pins it."""

from __future__ import annotations

import json

import pytest

from daemon.task.mcp.remote import DevOrigins, RemoteMcpError, check_endpoint, is_public
from daemon.task.mcp.schema import canonical, digest

# Go's `json.Marshal` of this schema decoded into `any`, and its digest (go1.26).
SCHEMA = (
    '{"type":"object","properties":{"q":{"type":"string","description":"a <b> & \\"c\\" é'
    ' \\u2028 ✓","default":"x"},"n":{"type":"number","minimum":1.0,"maximum":0.5,'
    '"multipleOf":1e-7,"big":12345678901234567890}},"required":["q"],'
    '"additionalProperties":false}'
)
GO_CANONICAL = (
    '{"additionalProperties":false,"properties":{"n":{"big":12345678901234567000,'
    '"maximum":0.5,"minimum":1,"multipleOf":1e-7,"type":"number"},"q":{"default":"x",'
    '"description":"a \\u003cb\\u003e \\u0026 \\"c\\" é \\u2028 ✓","type":"string"}},'
    '"required":["q"],"type":"object"}'
)
GO_DIGEST = "sha256:b6ecb6cb23b9338504e0785651dc3d51697dc75d7d7995eff6db7fed06b68e20"


def test_a_schema_is_written_and_hashed_as_go_writes_it() -> None:
    """Keys sorted, compact, HTML characters escaped, numbers as float64 in Go's notation:
    the digest an administrator's approval pinned."""
    value = json.loads(SCHEMA)
    assert canonical(value) == GO_CANONICAL
    assert digest(value) == GO_DIGEST
    assert [canonical(n) for n in (1e21, 1.5e-7, -0.0, 1e20, 2.5e-6, 5e300)] == [
        "1e+21",
        "1.5e-7",
        "-0",
        "100000000000000000000",
        "0.0000025",
        "5e+300",
    ]
    assert canonical("tab\there \x01 \\ \b\f") == '"tab\\there \\u0001 \\\\ \\b\\f"'


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:2800:220:1:248:1893:25c8:1946", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("169.254.169.254", False),  # the cloud metadata service
        ("100.64.0.1", False),
        ("198.51.100.7", False),
        ("::1", False),
        ("::ffff:10.0.0.1", False),
        ("fd00::1", False),
        ("224.0.0.1", False),
    ],
)
def test_only_public_addresses_are_reachable(address: str, public: bool) -> None:
    """Private, loopback, link-local, shared, documentation and multicast ranges are not."""
    assert is_public(address) is public


@pytest.mark.parametrize(
    ("url", "allowed", "words"),
    [
        ("http://mcp.example.com/x", [], "public HTTPS URL"),
        ("https://user:pw@mcp.example.com/x", [], "public HTTPS URL"),
        ("https://mcp.example.com/x?token=1", [], "public HTTPS URL"),
        ("https://localhost/x", [], "not public"),
        ("https://mcp.example.com/x", ["*.other.com"], "endpoint policy"),
        ("https://example.com/x", ["*.example.com"], "endpoint policy"),
    ],
)
def test_an_endpoint_must_be_public_https_within_its_policy(
    url: str, allowed: list[str], words: str
) -> None:
    """Only a public HTTPS URL without user, query or fragment, on an allowed host."""
    with pytest.raises(RemoteMcpError, match=words):
        check_endpoint(url, allowed, DevOrigins())


def test_a_named_dev_origin_skips_only_the_public_rule() -> None:
    """`https://127.0.0.1:8443` named by the operator passes, exactly; the host policy still
    holds."""
    dev = DevOrigins(frozenset({"https://127.0.0.1:8443"}))
    assert check_endpoint("https://127.0.0.1:8443/mcp", [], dev).dev
    assert check_endpoint("https://a.example.com/x", ["*.example.com"], dev).dev is False
    with pytest.raises(RemoteMcpError):
        check_endpoint("https://127.0.0.1:8444/mcp", [], dev)
    with pytest.raises(RemoteMcpError, match="endpoint policy"):
        check_endpoint("https://127.0.0.1:8443/mcp", ["mcp.example.com"], dev)
