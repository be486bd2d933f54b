"""Pi's models as Multica's daemon reads them: Pi's RPC mode, else its `--list-models` table.

    pi --mode rpc --no-session --no-skills --no-prompt-templates --no-context-files
    → {"id": "multica-state", "type": "get_state"}
    → {"id": "multica-models", "type": "get_available_models"}

The RPC models carry what the table only says yes or no to: a reasoning model's thinking
levels (`off` … `high` unless its `thinkingLevelMap` maps one to null; `xhigh` and `max` only
when mapped), and the state names the model Pi picks unasked and its level. Extensions stay
on: they may add providers. A Pi that does not answer the RPC within 7 s (an older one, a
fork) is asked for its table within 8 s more — `provider model …` rows (or `provider:model`
lines of older versions, printed on stderr by some), warnings and usage text left out — and
its models get no thinking levels.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.base import ParseStep, RunResult, RunStatus
from backends.models import Catalog, Model, Thinking, levels
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

RPC_ARGS = (
    "--mode",
    "rpc",
    "--no-session",
    "--no-skills",
    "--no-prompt-templates",
    "--no-context-files",
)
RPC_TIMEOUT = 7.0
TABLE_TIMEOUT = 8.0
_ORDER = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
# What Pi prints besides rows: warnings, usage text, and (0.73.1, no provider set up) "No
# models available. Use /login …", which would otherwise read as a model `No/models`.
_NOISE = (
    "no models match pattern",
    "no models available",
    "--help",
    "usage:",
    "unknown flag",
    "unknown command",
)


class Rpc:
    """The RPC conversation: both requests at once, stdin closed once both are answered."""

    def __init__(self, cwd: Path) -> None:
        del cwd
        self.state: dict[str, Any] = {}
        self.models: list[Any] | None = None
        self._answered: set[str] = set()

    def opening(self) -> bytes:
        requests = [
            {"id": "multica-state", "type": "get_state"},
            {"id": "multica-models", "type": "get_available_models"},
        ]
        return "".join(json.dumps(r) + "\n" for r in requests).encode()

    def feed(self, line: str) -> ParseStep:
        try:
            answer = json.loads(line)
        except ValueError:
            return ParseStep()
        if not isinstance(answer, dict) or answer.get("type") != "response":
            return ParseStep()
        data = answer.get("data") if answer.get("success") is True else None
        data = data if isinstance(data, dict) else {}
        which = answer.get("id"), answer.get("command")
        if which[0] == "multica-state" or which[1] == "get_state":
            self._answered.add("state")
            self.state = data
        elif which[0] == "multica-models" or which[1] == "get_available_models":
            self._answered.add("models")
            listed = data.get("models")
            self.models = listed if isinstance(listed, list) else []
        return ParseStep(close_stdin=self._answered == {"state", "models"})

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        return RunResult(RunStatus.COMPLETED if self.models else RunStatus.FAILED)


async def pi_models(cli: AgentCli) -> Catalog:
    """Pi's catalog over RPC, else from its table (empty when neither answers)."""
    talks: list[Rpc] = []

    def talk(cwd: Path) -> Rpc:
        talks.append(Rpc(cwd))
        return talks[-1]

    await ask(cli, RPC_ARGS, bound=RPC_TIMEOUT, talk=talk)
    if talks and talks[0].models:
        return Catalog.of(rpc_models(talks[0].models, talks[0].state))
    said = await ask(cli, ("--list-models",), bound=TABLE_TIMEOUT)
    text = said.text if said.text.strip() else said.stderr
    return Catalog.of(table_models(text.splitlines()))


def rpc_models(listed: Sequence[Any], state: dict[str, Any]) -> list[Model]:
    """The RPC's models as `provider/id`, the state's model the default with its level."""
    chosen = state.get("model") if isinstance(state.get("model"), dict) else {}
    default = f"{chosen.get('provider')}/{chosen.get('id')}" if chosen else ""
    level = state.get("thinkingLevel")
    level = level if isinstance(level, str) else ""
    models: list[Model] = []
    for raw in listed:
        if not isinstance(raw, dict):
            continue
        provider, model = str(raw.get("provider") or "").strip(), str(raw.get("id") or "").strip()
        model_id = f"{provider}/{model}"
        if not provider or not model or any(m.id == model_id for m in models):
            continue
        thinking = _thinking(raw)
        if model_id == default and thinking is not None and thinking.offers(level):
            thinking = Thinking(thinking.levels, level)
        models.append(Model(model_id, model_id, provider, model_id == default, thinking))
    return models


def _thinking(raw: dict[str, Any]) -> Thinking | None:
    """Pi's levels for one model: a reasoning model's, as `getSupportedThinkingLevels` has
    them (a model that does not reason has only `off`, and no picker)."""
    if raw.get("reasoning") is not True:
        return None
    mapped = raw.get("thinkingLevelMap")
    mapped = mapped if isinstance(mapped, dict) else {}
    kept = [
        value
        for value in _ORDER
        if not (value in mapped and mapped[value] is None)
        and (value not in ("xhigh", "max") or value in mapped)
    ]
    return Thinking(levels(kept)) if kept else None


def table_models(lines: Sequence[str]) -> list[Model]:
    """The models of `pi --list-models` output: table rows, or older `provider:model` lines."""
    models: list[Model] = []
    for line in lines:
        text = line.strip()
        lower = text.lower()
        if not text or lower.startswith(("warning:", "error:", "info:")) or "`" in text:
            continue
        if any(noise in lower for noise in _NOISE):
            continue
        words = text.split()
        if words[0].lower() == "provider":
            continue
        if any(c in words[0] for c in ":/"):
            model_id = words[0].replace(":", "/", 1)
        elif len(words) >= 2:
            model_id = f"{words[0]}/{words[1]}"
        else:
            continue
        provider, _, name = model_id.partition("/")
        if provider and name and all(m.id != model_id for m in models):
            models.append(Model(model_id, model_id, provider))
    return models
