"""Copilot's models as Multica's daemon reads them: the catalog its ACP mode (`copilot --acp`)
lists in `session/new`, which is the account's own (Pro, Pro+, Enterprise differ).

The CLI runs tasks in its JSON mode, where it has no effort setting: no model gets thinking
levels. Its catalog names no vendor, so one is read from the id (`gpt-` and OpenAI's `o3`
series, `claude-`, `gemini-`, `grok-`) for the picker's groups. A CLI that is not signed in
(or cannot start) gets Multica's stand-in list, marked as such.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from backends.acp.discovery import session_models
from backends.models import Catalog, Model

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

_OPENAI_SERIES = re.compile(r"o[0-9]+(-.*)?")
_VENDORS = (("gpt-", "openai"), ("claude-", "anthropic"), ("gemini-", "google"), ("grok-", "xai"))

STAND_IN = (
    ("gpt-5.5", "GPT-5.5", "openai"),
    ("gpt-5.4", "GPT-5.4", "openai"),
    ("gpt-5.4-mini", "GPT-5.4 mini", "openai"),
    ("gpt-5.3-codex", "GPT-5.3-Codex", "openai"),
    ("gpt-5.2-codex", "GPT-5.2-Codex", "openai"),
    ("gpt-5.2", "GPT-5.2", "openai"),
    ("gpt-5-mini", "GPT-5 mini", "openai"),
    ("gpt-4.1", "GPT-4.1", "openai"),
    ("claude-opus-4.7", "Claude Opus 4.7", "anthropic"),
    ("claude-sonnet-4.6", "Claude Sonnet 4.6", "anthropic"),
    ("claude-sonnet-4.5", "Claude Sonnet 4.5", "anthropic"),
    ("claude-haiku-4.5", "Claude Haiku 4.5", "anthropic"),
)


async def copilot_models(cli: AgentCli) -> Catalog:
    """The account's models, else the stand-in list."""
    found = await session_models(cli, ("--acp",))
    if not found:
        return Catalog.of([Model(*entry) for entry in STAND_IN], fallback=True)
    return Catalog.of([m if m.provider else _with_vendor(m) for m in found])


def vendor(model_id: str) -> str:
    """The vendor a Copilot model id names by its prefix ("" when none)."""
    if _OPENAI_SERIES.fullmatch(model_id):
        return "openai"
    return next((name for prefix, name in _VENDORS if model_id.startswith(prefix)), "")


def _with_vendor(model: Model) -> Model:
    return Model(model.id, model.label, vendor(model.id), model.default)
