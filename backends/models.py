"""The models an agent CLI offers, as Multica's model picker shows them, and whether a task's
thinking level and service tier fit the model it runs.

A `Catalog` is what one discovery round found: the models, each with its thinking levels and
service tiers in the CLI's own words (Claude's `low … max`, Codex's `none … ultra`, Pi's
`off … max`, an ACP agent's advertised effort option), never mapped onto a shared scale —
what a user picks goes back to the CLI as it is. `fallback` marks a stand-in list (discovery
failed): shown, never kept by the server as the runtime's catalog. `supported` is False for
a CLI whose model cannot be chosen at all (the picker then says the runtime manages it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# Claude Code's context-window suffix (`claude-opus-5[1m]`): the model is the base model.
_CONTEXT_WINDOW = re.compile(r"\[[1-9][0-9]*[km]\]$")
_PLAIN_ID = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")


class DiscoveryFailed(Exception):
    """The CLI was asked for its catalog and gave none it stands behind (DeepSeek Harness's
    `--list-models` exiting non-zero, or listing nothing): the model-list answer fails, and a
    task's thinking level is passed on unchecked, as Multica's daemon does with a failed read."""


@dataclass(frozen=True, slots=True)
class ThinkingLevel:
    """One value the CLI takes as its reasoning effort, with the label its own UI shows."""

    value: str
    label: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class Thinking:
    """A model's reasoning efforts; `default` is the one the CLI picks unasked ("": unknown)."""

    levels: tuple[ThinkingLevel, ...]
    default: str = ""

    def offers(self, value: str) -> bool:
        """Whether `value` is one of the levels."""
        return any(level.value == value for level in self.levels)


@dataclass(frozen=True, slots=True)
class ServiceTier:
    """One execution tier of a model (Codex's `priority`, shown as Fast)."""

    id: str
    name: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class Model:
    """One model of the picker; `id` is what the CLI's model option takes."""

    id: str
    label: str = ""
    provider: str = ""
    default: bool = False
    thinking: Thinking | None = None
    service_tiers: tuple[ServiceTier, ...] = ()

    def wire(self) -> dict[str, Any]:
        """The model as Multica's model-list result carries it."""
        body: dict[str, Any] = {"id": self.id, "label": self.label or self.id}
        if self.provider:
            body["provider"] = self.provider
        if self.default:
            body["default"] = True
        if self.thinking is not None:
            levels = [_level(level) for level in self.thinking.levels]
            thinking: dict[str, Any] = {"supported_levels": levels}
            if self.thinking.default:
                thinking["default_level"] = self.thinking.default
            body["thinking"] = thinking
        if self.service_tiers:
            body["service_tiers"] = [_tier(tier) for tier in self.service_tiers]
        return body


@dataclass(frozen=True, slots=True)
class Catalog:
    """What one model discovery found."""

    models: tuple[Model, ...] = ()
    fallback: bool = False
    """A stand-in list: discovery failed (never cached, never kept by the server)."""
    supported: bool = True
    """Whether the CLI's model can be chosen at all."""

    @classmethod
    def of(cls, models: Sequence[Model], **options: Any) -> Catalog:
        return cls(tuple(models), **options)

    def result(self) -> dict[str, Any]:
        """The body of the model-list result Multica's server reads."""
        return {
            "status": "completed",
            "models": [model.wire() for model in self.models],
            "supported": self.supported,
            "fallback": self.fallback,
        }


def valid_thinking(catalog: Catalog, family: str, model: str, level: str) -> bool:
    """Whether the thinking `level` fits `model` ("" = the CLI's default model) in `catalog`.

    As Multica's daemon decides it: an empty level always fits; Codex's default model is
    whatever its config says, so no level is given for it; otherwise the default model is
    the one the catalog marks, and OpenCode, which marks none, takes a level any of its models
    offers. A model the catalog does not list, or one without thinking levels, takes none."""
    if not level:
        return True
    if not model and family == "codex":
        return False
    target = _CONTEXT_WINDOW.sub("", model) if family == "claude" else model
    if not target:
        target = next((m.id for m in catalog.models if m.default), "")
        if not target:
            if family == "opencode":
                return any(m.thinking and m.thinking.offers(level) for m in catalog.models)
            return False
    for found in catalog.models:
        if found.id == target:
            return found.thinking is not None and found.thinking.offers(level)
    return False


def valid_service_tier(catalog: Catalog, family: str, model: str, tier: str) -> bool:
    """Whether `tier` is one of `model`'s service tiers: only Codex has them, and only for
    a model named (its default model is its config's)."""
    if not tier:
        return True
    if family != "codex" or not model:
        return False
    for found in catalog.models:
        if found.id == model:
            return any(t.id == tier for t in found.service_tiers)
    return False


def qualified(catalog: Catalog, model: str) -> str:
    """`model` as the catalog names it: a bare id one provider's `provider/id` claims becomes
    that id (OpenCode's catalog, Pi's); anything uncertain stays as it is."""
    model = model.strip()
    if not model or catalog.fallback or any(m.id == model for m in catalog.models):
        return model
    claims = {m.id for m in catalog.models if m.provider and m.id == f"{m.provider}/{model}"}
    return claims.pop() if len(claims) == 1 else model


LEVEL_LABELS = {
    "none": "None",
    "off": "Off",
    "minimal": "Minimal",
    "low": "Low",
    "medium": "Medium",
    "high": "High",
    "xhigh": "Extra high",
    "max": "Max",
    "ultra": "Ultra",
}
"""How the CLIs' UIs name the thinking levels they share."""


def level_label(value: str) -> str:
    """A thinking level's label as the CLIs' UIs show it (a value none knew yet as it is,
    title-cased)."""
    return LEVEL_LABELS.get(value) or value.replace("-", " ").title()


def levels(values: Sequence[str]) -> tuple[ThinkingLevel, ...]:
    """Thinking levels for `values`, labelled as the CLIs' UIs do."""
    return tuple(ThinkingLevel(v, level_label(v)) for v in values)


def plain_id(word: str) -> bool:
    """Whether `word` reads as a model or agent id in a CLI's plain listing (a letter first,
    then letters, digits and `-_./`), not as a header (`Agents:`) or a box-drawing glyph."""
    return _PLAIN_ID.fullmatch(word) is not None


def _level(level: ThinkingLevel) -> dict[str, str]:
    body = {"value": level.value, "label": level.label}
    if level.description:
        body["description"] = level.description
    return body


def _tier(tier: ServiceTier) -> dict[str, str]:
    body = {"id": tier.id, "name": tier.name}
    if tier.description:
        body["description"] = tier.description
    return body


EMPTY = Catalog()
"""No models offered; the model is still entered by hand (Qwen Code, the command backend)."""
