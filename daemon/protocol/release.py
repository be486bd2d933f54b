"""Which Multica daemon release this daemon stands in for, as `cli_version` reports it.

Multica decides what a daemon can do from the `cli_version` it registered with: features
that need the daemon's help are offered only from the release that first shipped that help
(quick-create is refused, the handoff note greyed out, below their floors). The server and
the web UI both read the first `x.y.z` in the string and ignore the rest, so the version
goes out as `<Multica release> (agent-daemon <own version>)`: the release whose protocol
this daemon speaks first, for the gates, and this daemon's own name and version after it,
which is what a user reads under "CLI" on the runtime's page. Not being a bare release,
it also makes the page say "Local build" instead of offering a self-update this daemon
declines.
"""

from __future__ import annotations

import daemon

MULTICA_RELEASE = "0.4.10"
"""The Multica daemon release whose protocol this daemon implements: at least every floor
Multica gates a daemon feature on (tests/daemon/protocol/test_release.py lists them)."""


def cli_version(own: str = daemon.__version__) -> str:
    """`0.4.10 (agent-daemon 0.1.0)`: what `cli_version` and `X-Client-Version` carry."""
    return f"{MULTICA_RELEASE} (agent-daemon {own})"
