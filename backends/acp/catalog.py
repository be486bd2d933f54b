"""The ACP agents the daemon offers, by the runtime type Multica's server knows them as.

An agent whose only difference is its entry is declared here; one with more to say (why ACP,
its quirks) has a folder of its own. Each needs its settings field in daemon/config.py
(`<name>: AgentCliSettings = _agent_cli(...)`: its `MULTICA_<NAME>_PATH`, `_ARGS`, `_MODEL`
and `_IDLE_WATCHDOG`) to be found by discovery.

Hermes and the entries after it are the ACP agents Multica's daemon runs, with the command
lines it starts them with. Hermes Agent, Grok Build and QwenPaw run in the tests (PyPI's
`hermes-agent`, `grok-cli-bin` and `qwenpaw`, against the fake Chat Completions API); the
others' CLIs cannot be installed and run offline here (Qoder CLI, which npm serves, will not
run without a Qoder login), so each is marked `untested`: the daemon offers it and says so when it
finds the CLI. Each picks its model through `session/set_model` (as in Multica) and is resumed
where it offers `session/resume` or `session/load`. What Multica does beyond the command line
for some of them is noted at their entries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from backends.acp.agent import AcpAgent
from backends.gemini import GEMINI
from backends.models import Catalog, Model
from backends.opencode import OPENCODE

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

UNTESTED = "no CLI available offline: its entry follows Multica's command line"


async def _managed(cli: AgentCli) -> Catalog:
    """No catalog and no choice: the CLI's own configuration picks its model (its ACP has no
    session-scoped model switch, and `session/set_model` would rewrite that configuration)."""
    del cli
    return Catalog(supported=False)


async def _grok_models(cli: AgentCli) -> Catalog:
    """Grok's session catalog, its provider `xai`; when the handshake fails (not signed in,
    offline), Multica's stand-in list, marked as such."""
    # Imported here: start-up reads this catalog for the commands to look for, and the
    # handshake's modules would cost it about 2 ms on every machine, with Grok or without.
    from backends.acp.discovery import session_models

    found = await session_models(cli, GROK.acp_args)
    if not found:
        stand_in = [Model("grok-4.5", "Grok 4.5", "xai", default=True)]
        stand_in.append(Model("grok-composer-2.5-fast", "Grok Composer 2.5 Fast", "xai"))
        return Catalog.of(stand_in, fallback=True)
    return Catalog.of([m if m.provider else Model(m.id, m.label, "xai", m.default) for m in found])


# Hermes Agent (PyPI `hermes-agent[acp]`, 0.19.0 in the tests): its shell tool is `terminal`,
# and it reads the brief from AGENTS.md.
HERMES = AcpAgent(
    name="hermes",
    label="Hermes Agent",
    command="hermes",
    acp_args=("acp",),
    # Without it Hermes asks before every dangerous shell command, outside ACP.
    env={"HERMES_YOLO_MODE": "1"},
    # jcode (also run as `hermes`) applies its advertised effort; Hermes Agent advertises none.
    effort=True,
)

# Kimi Code CLI (MoonshotAI): permissions are asked over ACP and granted by the client; its
# `--yolo` belongs to the root command, not to `acp`. It reads no AGENTS.md: the runtime brief
# goes in its prompt (daemon/task/setup/runtime_brief.py).
KIMI = AcpAgent(
    name="kimi",
    label="Kimi Code CLI",
    command="kimi",
    acp_args=("acp",),
    untested=UNTESTED,
)

KIRO = AcpAgent(
    name="kiro",
    label="Kiro CLI",
    command="kiro-cli",
    acp_args=("acp", "--trust-all-tools"),
    untested=UNTESTED,
)

# Qoder takes `--acp` as a global flag (not a subcommand); `--yolo` bypasses its permission
# prompts. The China-region build is a second executable and a runtime type of its own.
QODER = AcpAgent(
    name="qoder",
    label="Qoder CLI",
    command="qodercli",
    acp_args=("--yolo", "--acp"),
    untested=UNTESTED,
)

QODER_CN = AcpAgent(
    name="qoderclicn",
    label="Qoder CLI (China)",
    command="qoderclicn",
    acp_args=("--yolo", "--acp"),
    untested=UNTESTED,
)

# Trae CLI reads `.trae/rules/`, not AGENTS.md: the brief goes in its prompt.
TRAECLI = AcpAgent(
    name="traecli",
    label="Trae CLI",
    command="traecli",
    acp_args=("acp", "serve", "--yolo"),
    untested=UNTESTED,
)

# Grok Build (0.2.111 in the tests, PyPI's `grok-cli-bin`): `--no-auto-update` is a global
# flag that keeps a background update out of an unattended run; its shell tool is
# `run_terminal_command`, and it reads the brief from AGENTS.md. Multica puts configured
# arguments before `stdio` and answers the CLI's `authenticate` step (an API key in
# XAI_API_KEY, else the stored login); this client appends them after it and does not
# authenticate — a model of the user's config with its own key needs none.
GROK = AcpAgent(
    name="grok",
    label="Grok Build CLI",
    command="grok",
    acp_args=("--no-auto-update", "agent", "--always-approve", "stdio"),
    min_version="0.2.89",
    list_models=_grok_models,
)

# QwenPaw 2.x (1.x speaks another protocol; 2.2.2.post1 in the tests, from PyPI): its shell
# tool is `execute_shell_command`; the brief goes in its prompt. Multica also gives it a
# per-task `--workspace`, which this entry does not.
QWENPAW = AcpAgent(
    name="qwenpaw",
    label="QwenPaw",
    command="qwenpaw",
    acp_args=("acp",),
    list_models=_managed,
)

# MiniMax Code declares no `loadSession`: a task that names a session starts a fresh one.
MCODE = AcpAgent(
    name="mcode",
    label="MiniMax Code",
    command="mcode",
    acp_args=("acp",),
    min_version="0.1.2",
    untested=UNTESTED,
    list_models=_managed,
)

# Dim 0.3.10 releases a session's lock when its process exits, so `session/load` works from
# the next run. Its sessions start read-only; Multica switches them to full access with
# `session/set_config_option` (permission, mode), which this client does not send.
DIM = AcpAgent(
    name="dim",
    label="Dim",
    command="dim",
    acp_args=("acp",),
    min_version="0.3.10",
    untested=UNTESTED,
)

# Reasonix sandboxes its shell where the host supports it; these are Multica's settings.
REASONIX = AcpAgent(
    name="reasonix",
    label="Reasonix",
    command="reasonix",
    acp_args=(
        "acp",
        "--profile",
        "balanced",
        "--planner",
        "auto",
        "--sandbox-network",
        "auto",
        "--sandbox-bash",
        "auto",
        "--workspace-only",
    ),
    untested=UNTESTED,
    effort=True,
)

AGENTS: tuple[AcpAgent, ...] = (
    OPENCODE,
    GEMINI,
    HERMES,
    KIMI,
    KIRO,
    QODER,
    QODER_CN,
    TRAECLI,
    GROK,
    QWENPAW,
    MCODE,
    DIM,
    REASONIX,
)

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
