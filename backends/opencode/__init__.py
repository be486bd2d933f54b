"""OpenCode (`opencode-ai` on npm) through the ACP backend: `opencode acp`.

ACP rather than `opencode run --format json`: in `run` mode the CLI prints nothing while a
tool runs and reports the call only once it has finished, so a long command looks exactly
like a hung agent; over ACP the call is reported pending, in progress and completed.
OpenCode picks its model from its configuration; a configured model switches the session to
it (`session/set_config_option`). Its models are those `opencode models` lists (`models.py`),
a model's variants its thinking levels, set through the session's effort option. Two first
starts on a fresh HOME race on creating its database (one exits before its session starts),
so the first start there runs alone. Its default idle window is narrower than the others'
(`MULTICA_OPENCODE_IDLE_WATCHDOG`, 10 min as in Multica): it streams every token and tool
step, so ten silent minutes mean a stalled stream.
"""

from __future__ import annotations

from backends.acp import AcpAgent
from backends.opencode.models import opencode_models

OPENCODE = AcpAgent(
    name="opencode",
    label="OpenCode",
    command="opencode",
    acp_args=("acp",),
    min_version="1.18.33",
    pending_runs=False,
    first_start_alone=True,
    effort=True,
    list_models=opencode_models,
)
