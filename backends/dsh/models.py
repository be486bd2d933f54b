"""DeepSeek Harness's models as Multica's daemon reads them: `dsh --profile multica
--list-models`, which prints `models` frames of the stdio protocol.

    {"v": 1, "type": "models", "models": [{"id": "deepseek/deepseek-v4", "label": "DeepSeek V4",
      "provider": "deepseek", "default": true, "thinking": {"supported_levels":
      [{"value": "high", "label": "High"}], "default_level": "high"}}]}

The catalog is dsh's own, thinking levels and default included, taken as it is given (a
model's id is the `provider/id` a task's model is). Frames of another version or type, and
lines that are not frames, are passed over. Unlike the other CLIs' lists, a failed read is
an error, as in Multica: a dsh that exits non-zero (or not within the bound) or lists nothing
raises `DiscoveryFailed` — the model-list answer fails, and a task's thinking level is passed
on for dsh to judge. The level reaches dsh as the `execute` frame's `reasoning_effort`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from backends.dsh.frames import PROTOCOL_VERSION
from backends.json_lines import json_object
from backends.models import Catalog, DiscoveryFailed, Model, Thinking, ThinkingLevel
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

log = logging.getLogger(__name__)

LIST_TIMEOUT = 30.0


async def dsh_models(cli: AgentCli, profile: str) -> Catalog:
    """The models dsh's runtime `profile` lists; raises `DiscoveryFailed` without them."""
    said = await ask(cli, ["--profile", profile, "--list-models"], bound=LIST_TIMEOUT)
    if said.exit_code is None:
        raise DiscoveryFailed(f"dsh --list-models did not finish within {LIST_TIMEOUT:.0f}s")
    if not said.ok:
        raise DiscoveryFailed(f"dsh --list-models exited {said.exit_code}")
    found = parse_frames(said.lines)
    if not found:
        raise DiscoveryFailed("dsh returned an empty model catalog")
    return Catalog.of(found)


def parse_frames(lines: Iterable[str]) -> list[Model]:
    """The models of every `models` frame of protocol version 1, in order."""
    models: list[Model] = []
    for line in lines:
        frame = json_object(line)
        if frame is None or frame.get("v") != PROTOCOL_VERSION or frame.get("type") != "models":
            continue
        try:
            models += [_model(item) for item in _list(frame.get("models"))]
        except _NotTheShape:
            log.info("dsh: a models frame not of the protocol's shape passed over")
    return models


class _NotTheShape(ValueError):
    """A frame whose fields are not of the protocol's types (the whole frame is passed over)."""


def _model(item: Any) -> Model:
    item = _object(item, "id", "label", "provider")
    if not isinstance(item.get("default", False), bool):
        raise _NotTheShape
    label, provider = item.get("label") or "", item.get("provider") or ""
    return Model(item.get("id") or "", label, provider, bool(item.get("default")),
                 _thinking(item.get("thinking")))  # fmt: skip


def _thinking(block: Any) -> Thinking | None:
    """A model's thinking levels (None: it has none)."""
    if block is None:
        return None
    block = _object(block, "default_level")
    levels = []
    for level in _list(block.get("supported_levels")):
        level = _object(level, "value", "label", "description")
        levels.append(ThinkingLevel(level.get("value") or "", level.get("label") or "",
                                    level.get("description") or ""))  # fmt: skip
    return Thinking(tuple(levels), block.get("default_level") or "") if levels else None


def _object(value: Any, *strings: str) -> dict[str, Any]:
    """`value` as an object whose `strings` fields are strings (or absent)."""
    if not isinstance(value, dict):
        raise _NotTheShape
    if not all(isinstance(value.get(f), str | None) for f in strings):
        raise _NotTheShape
    return value


def _list(value: Any) -> list[Any]:
    """`value` as a list (null: an empty one)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _NotTheShape
    return value
