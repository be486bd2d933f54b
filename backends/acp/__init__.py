"""The Agent Client Protocol (ACP): one JSON-RPC-over-stdio client for every agent that speaks it.

* `agent` — `AcpAgent`, one CLI as a table entry (command, ACP arguments, minimum version);
* `backend` — `AcpBackend`, the backend that runs any such entry;
* `session` — one run's handshake, session and prompt turn, as a line parser;
* `updates` — `session/update` notifications as the daemon's messages;
* `requests` — our answers to the agent's requests (permissions granted, the rest refused);
* `usage` — a turn's token usage; `rpc` — the JSON-RPC frames; `first_start` — one first
  start at a time on a fresh data directory (OpenCode's database).

The agents themselves live in their own folders (`backends/opencode`, `backends/gemini`) or,
when nothing but their entry differs, in `catalog`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from backends.acp.agent import AcpAgent

if TYPE_CHECKING:
    from backends.acp.backend import AcpBackend

__all__ = ["AcpAgent", "AcpBackend"]


def __getattr__(name: str) -> Any:
    # The backend is imported when first named: the catalog's entries (read at start-up for
    # the commands to look for) come through this package, and most machines have no ACP CLI.
    if name == "AcpBackend":
        from backends.acp.backend import AcpBackend

        return AcpBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
