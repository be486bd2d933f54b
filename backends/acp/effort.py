"""An ACP agent's reasoning effort: the session option that sets it, read from what the agent
advertises (`configOptions` of `session/new`, or of the answer to a config change).

ACP has no marker saying "this option is the effort"; as Multica's daemon, an option whose
id or category is `effort` or `thought_level` is taken for it (OpenCode's `effort` once a
model with variants is chosen, Reasonix's `effort`, jcode's `reasoning_effort` of category
`thought_level`). Its values are the agent's own words, passed back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from backends.json_lines import str_field
from backends.models import ThinkingLevel

_MARKERS = frozenset({"effort", "thought_level"})


@dataclass(frozen=True, slots=True)
class EffortOption:
    """The effort option one session advertised: the id to set, its levels, its value now
    ("" when the agent reports one it does not offer, or none)."""

    config_id: str
    levels: tuple[ThinkingLevel, ...]
    current: str = ""

    def offers(self, value: str) -> bool:
        return any(level.value == value for level in self.levels)


def config_options(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The `configOptions` (or `config_options`) of an answer, objects only."""
    options = result.get("configOptions") or result.get("config_options") or []
    return [o for o in options if isinstance(o, dict)] if isinstance(options, list) else []


def effort_option(result: Mapping[str, Any]) -> EffortOption | None:
    """The effort option of an answer, or None when it advertises none (or one without an
    id: there would be nothing to set)."""
    for option in config_options(result):
        config_id = str_field(option.get("id")).strip()
        category = str_field(option.get("category")).strip()
        if not ({config_id.lower(), category.lower()} & _MARKERS) or not config_id:
            continue
        levels: list[ThinkingLevel] = []
        for choice in option.get("options") or []:
            value = str_field(choice.get("value")).strip() if isinstance(choice, dict) else ""
            if value and all(level.value != value for level in levels):
                label = str_field(choice.get("name")).strip() or value.title()
                levels.append(ThinkingLevel(value, label))
        found = EffortOption(config_id, tuple(levels))
        current = current_value(option)
        return EffortOption(config_id, found.levels, current if found.offers(current) else "")
    return None


def current_value(option: Mapping[str, Any]) -> str:
    """An option's value now (`currentValue`, or `current_value`)."""
    return (str_field(option.get("currentValue")) or str_field(option.get("current_value"))).strip()


def confirmed(result: Mapping[str, Any], config_id: str) -> str:
    """The value the answer to a config change reports for `config_id` ("": none)."""
    for option in config_options(result):
        if str_field(option.get("id")).strip() == config_id:
            return current_value(option)
    return ""
