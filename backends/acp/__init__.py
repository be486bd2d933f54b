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

from backends.acp.agent import AcpAgent
from backends.acp.backend import AcpBackend

__all__ = ["AcpAgent", "AcpBackend"]
