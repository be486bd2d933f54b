"""The ACP agents the daemon offers, by the runtime type Multica's server knows them as.

An agent whose only difference is its entry is declared here; one with more to say (why ACP,
its quirks) has a folder of its own. Each needs its settings field in daemon/config.py
(`<name>: AgentCliSettings = _agent_cli(...)`: its `MULTICA_<NAME>_PATH`, `_ARGS`, `_MODEL`
and `_IDLE_WATCHDOG`) to be found by discovery.
"""

from __future__ import annotations

from backends.acp.agent import AcpAgent
from backends.gemini import GEMINI
from backends.opencode import OPENCODE

HERMES = AcpAgent(
    name="hermes",
    label="Hermes Agent",
    command="hermes",
    acp_args=("acp",),
    min_version="",
    provider="hermes",
    # Without it Hermes asks before every dangerous shell command, outside ACP.
    env={"HERMES_YOLO_MODE": "1"},
)

AGENTS: tuple[AcpAgent, ...] = (OPENCODE, GEMINI, HERMES)

# The Claude Code ACP adapter (`@agentclientprotocol/claude-agent-acp` on npm): proof that a
# new ACP agent needs only its entry. It is not offered as a runtime: Multica's server has no
# type for it (the `claude` runtime is Claude Code itself). It reports a running tool call as
# pending until it ends, which the default `pending_runs` covers.
CLAUDE_ACP = AcpAgent(
    name="claude-acp",
    label="Claude Code (ACP)",
    command="claude-agent-acp",
    acp_args=(),
    min_version="0.101.0",
    provider="anthropic",
)
