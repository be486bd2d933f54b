"""OpenCode's models as Multica's daemon reads them: `opencode models --verbose`.

The CLI prints one `provider/model` line per model, each followed (verbose) by its metadata
as pretty-printed JSON; a model whose metadata says it reasons, or whose `variants` are
reasoning variants, offers those variants as its thinking levels (`low`, `high`, ...; a
disabled one left out). The run's level is set through the session's effort option, which
OpenCode's ACP offers once such a model is chosen (Multica passes `run --variant`). Lines
are read even from a run that failed: a stale configuration entry can fail the command
while it still lists what it can resolve. Verbose output with no model in it is read again
from the plain command. The catalog is synced over the network by newer versions: 15 s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from backends.models import Catalog, Model, Thinking, levels
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh", "max")


async def opencode_models(cli: AgentCli) -> Catalog:
    """The catalog `opencode models` prints (empty when it prints none)."""
    models = parse_models((await ask(cli, ("models", "--verbose"))).lines)
    if not models:
        models = parse_models((await ask(cli, ("models",))).lines)
    return Catalog.of(models)


def parse_models(lines: Sequence[str]) -> list[Model]:
    """The models of `opencode models` output, plain or verbose."""
    models: dict[str, Model] = {}
    i = 0
    while i < len(lines):
        model_id = _model_line(lines[i])
        i += 1
        if not model_id:
            continue
        if model_id not in models:
            provider = model_id.split("/", 1)[0]
            models[model_id] = Model(model_id, model_id, provider)
        while i < len(lines) and not lines[i].strip():
            i += 1
        if i >= len(lines) or not lines[i].strip().startswith("{"):
            continue
        raw, i = _json_block(lines, i)
        thinking = _thinking(raw)
        if thinking is not None:
            found = models[model_id]
            models[model_id] = Model(found.id, found.label, found.provider, thinking=thinking)
    return list(models.values())


def _model_line(line: str) -> str:
    """The model id a line starts with ("": not a model line, as a header or JSON)."""
    words = line.split()
    if not words:
        return ""
    word = words[0]
    if word[0] in '"{[' or "/" not in word or word == word.upper():
        return ""
    return word


def _json_block(lines: Sequence[str], start: int) -> tuple[Any, int]:
    """The JSON value starting at `start` (None if it never closes) and the index after it."""
    text = ""
    for i in range(start, len(lines)):
        if i > start and _model_line(lines[i].strip()):
            return None, i
        text = f"{text}\n{lines[i]}" if text else lines[i]
        try:
            return json.loads(text), i + 1
        except ValueError:
            continue
    return None, len(lines)


def _thinking(raw: Any) -> Thinking | None:
    if not isinstance(raw, dict):
        return None
    variants = raw.get("variants")
    variants = variants if isinstance(variants, dict) else {}
    reasons = raw.get("reasoning") is True or any(
        name in _ORDER or (isinstance(v, dict) and (v.get("reasoningEffort") or v.get("thinking")))
        for name, v in variants.items()
    )
    if not reasons:
        return None
    names = [
        name
        for name, v in variants.items()
        if name and not (isinstance(v, dict) and v.get("disabled") is True)
    ]
    names.sort(key=lambda n: (_ORDER.index(n) if n in _ORDER else len(_ORDER), n))
    if not names:
        return None
    return Thinking(levels(names))
