"""Claude Code's models as Multica's daemon offers them: its list of the `--model` values the
CLI takes, each with the `--effort` levels this CLI's `--help` names.

The help prints `--effort <level>  Effort level for the current session (low, medium, high,
xhigh, max)`; those are the levels, narrowed per model where Anthropic documents gaps (only
Opus takes `xhigh`, Haiku stops at `high`). A help that names `--effort` but no readable list
means a changed format: the last known list is offered. A help without `--effort` is a CLI
older than the flag, which would refuse it: no levels then. A CLI whose help cannot be read
at all gets the three levels every release has taken. The list is the catalog itself, not a
stand-in (no discovery failed), so it is never a fallback.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from backends.models import Catalog, Model, Thinking, levels
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

_EFFORT = re.compile(r"--effort\s*(?:<[^>]+>)?\s*(?:Effort level[^(]*)?\(([^)]+)\)")
_EVERY = ("low", "medium", "high", "xhigh", "max")
_SAFE = ("low", "medium", "high")
_OPUS = frozenset(_EVERY)
_SONNET = frozenset({"low", "medium", "high", "max"})

MODELS = (
    ("claude-sonnet-5", "Claude Sonnet 5", None),
    ("claude-sonnet-4-6", "Claude Sonnet 4.6", _SONNET),
    ("claude-fable-5", "Claude Fable 5", None),
    ("claude-opus-5", "Claude Opus 5", _OPUS),
    ("claude-opus-4-8", "Claude Opus 4.8", _OPUS),
    ("claude-opus-4-7", "Claude Opus 4.7", _OPUS),
    ("claude-haiku-4-5-20251001", "Claude Haiku 4.5", frozenset(_SAFE)),
    ("claude-opus-4-6", "Claude Opus 4.6", _OPUS),
    ("claude-sonnet-4-5", "Claude Sonnet 4.5", _SONNET),
)
"""Multica's list: id, label and the efforts the model takes (None: every one the CLI names)."""
DEFAULT = "claude-sonnet-4-6"


async def claude_models(cli: AgentCli) -> Catalog:
    """The models, each with the efforts this CLI's `--help` names that the model takes."""
    said = await ask(cli, ("--help",), bound=10.0)
    efforts = help_efforts(f"{said.text}\n{said.stderr}") if said.ok else _SAFE
    models = []
    for model_id, label, allowed in MODELS:
        kept = [e for e in efforts if allowed is None or e in allowed]
        thinking = Thinking(levels(kept), "medium") if kept else None
        models.append(Model(model_id, label, "anthropic", model_id == DEFAULT, thinking))
    return Catalog.of(models)


def help_efforts(text: str) -> tuple[str, ...]:
    """The `--effort` levels `claude --help` names (see the module's note for the cases)."""
    match = _EFFORT.search(text)
    if match:
        found = tuple(part.strip() for part in match.group(1).split(",") if part.strip())
        if found:
            return found
    return _EVERY if "--effort" in text else ()
