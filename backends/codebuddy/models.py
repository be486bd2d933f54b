"""CodeBuddy Code's models as Multica's daemon reads them: the catalog its ACP mode
(`codebuddy --acp`) lists in `session/new`, not Claude Code's list (CodeBuddy's account
offers its own: Hunyuan, GLM, Kimi, DeepSeek, …).

The same answer carries the effort, a `thought_level` option CodeBuddy advertises for the
whole CLI, so every model gets its levels. A task's level goes to `--effort`, which takes
`minimal`, `low`, `medium`, `high`, `xhigh` and `max` only: the option's other choice
(`enabled`, a session toggle and its usual current value) is left out, and a current value
outside those six is no default. No usable option: the six, `medium` the default. The ids
name no vendor, so one is read from their prefix for the picker's groups. A CLI that cannot
answer (not signed in, not installed) gets Multica's stand-in list with the six levels,
marked as such.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from backends.acp.discovery import new_session, parse_models
from backends.acp.effort import effort_option
from backends.models import Catalog, Model, Thinking, levels

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

FLAG_LEVELS = ("minimal", "low", "medium", "high", "xhigh", "max")
"""What `codebuddy --effort` takes (CodeBuddy 2.130.0)."""
STATIC_THINKING = Thinking(levels(FLAG_LEVELS), "medium")
STAND_IN = (
    Model("claude-sonnet-4.6", "Claude Sonnet 4.6", "anthropic", True, STATIC_THINKING),
    Model("claude-opus-4.7", "Claude Opus 4.7", "anthropic", thinking=STATIC_THINKING),
    Model("gemini-3.1-pro", "Gemini 3.1 Pro", "google", thinking=STATIC_THINKING),
    Model("gpt-5.5", "GPT 5.5", "openai", thinking=STATIC_THINKING),
    Model("deepseek-v3-2-volc-ioa", "Deepseek V3 2 Volc IOA", "deepseek",
          thinking=STATIC_THINKING),
)  # fmt: skip
_VENDORS = (("claude-", "anthropic"), ("gemini-", "google"), ("gpt-", "openai"),
            ("glm-", "zhipu"), ("minimax-", "minimax"), ("kimi-", "kimi"),
            ("deepseek-", "deepseek"))  # fmt: skip
_HUNYUAN = re.compile(r"hy[0-9]")


async def codebuddy_models(cli: AgentCli) -> Catalog:
    """The account's models with CodeBuddy's efforts, else the stand-in list."""
    session = await new_session(cli, ("--acp",))
    found = parse_models(session) if session is not None else None
    if session is None or not found:
        return Catalog.of(STAND_IN, fallback=True)
    thinking = session_thinking(session)
    return Catalog.of(
        [Model(m.id, m.label, m.provider or vendor(m.id), m.default, thinking) for m in found]
    )


def session_thinking(session: dict[str, Any]) -> Thinking:
    """The levels of the session's effort option that `--effort` takes (the six when none)."""
    option = effort_option(session)
    offered = [lvl.value for lvl in option.levels] if option is not None else []
    usable = [value for value in offered if value in FLAG_LEVELS]
    if option is None or not usable:
        return STATIC_THINKING
    default = option.current if option.current in FLAG_LEVELS else ""
    return Thinking(levels(usable), default)


def vendor(model_id: str) -> str:
    """The vendor a CodeBuddy model id names by its prefix ("" when none)."""
    if _HUNYUAN.match(model_id):
        return "hunyuan"
    return next((name for prefix, name in _VENDORS if model_id.startswith(prefix)), "")
