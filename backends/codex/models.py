"""Codex's models as Multica's daemon reads them: `codex debug models --bundled` (Codex
0.122.0 and later), the catalog bundled with the installed CLI, as JSON on stdout.

Each visible model (`visibility` other than `hide`) brings its reasoning efforts
(`supported_reasoning_levels`, its `default_reasoning_level`) and its service tiers (`priority`
is Fast); the first is the CLI's preferred model. `--bundled` skips the network refresh: what
the installed binary accepts is what matters. An older CLI, or an answer that cannot be read,
gets Multica's list of recent models with their efforts (and no service tiers: those depend on
the account); Multica does not mark that list as a stand-in, and neither is it marked here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from backends.models import (
    Catalog,
    Model,
    ServiceTier,
    Thinking,
    ThinkingLevel,
    level_label,
    levels,
)
from backends.probe import ask
from backends.version import parse_version, version_at_least

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

DEBUG_MODELS = ("debug", "models", "--bundled")
DEBUG_MODELS_SINCE = "0.122.0"
_NAMES = {
    "gpt-5.6-sol": "GPT-5.6 Sol",
    "gpt-5.6-terra": "GPT-5.6 Terra",
    "gpt-5.6-luna": "GPT-5.6 Luna",
}


async def codex_models(cli: AgentCli) -> Catalog:
    """The bundled catalog of the installed CLI, else Multica's list."""
    version = cli.version or await cli.detect() or ""
    if version_at_least(parse_version(version), DEBUG_MODELS_SINCE) and version:
        said = await ask(cli, DEBUG_MODELS)
        found = parse_catalog(said.text) if said.ok else []
        if found:
            return Catalog.of(found)
    return Catalog.of(known_models())


def parse_catalog(text: str) -> list[Model]:
    """The visible models of `debug models` output (none when it is not that JSON)."""
    try:
        answer = json.loads(text)
    except ValueError:
        return []
    listed = answer.get("models") if isinstance(answer, dict) else None
    models: list[Model] = []
    for entry in listed if isinstance(listed, list) else []:
        if not isinstance(entry, dict) or not _text(entry, "slug"):
            continue
        if entry.get("visibility") == "hide":
            continue
        slug = _text(entry, "slug")
        label = _NAMES.get(slug) or _text(entry, "display_name") or slug
        models.append(Model(slug, label, "openai", not models, _thinking(entry), _tiers(entry)))
    return models


def _thinking(entry: dict[str, Any]) -> Thinking | None:
    found: list[ThinkingLevel] = []
    for level in entry.get("supported_reasoning_levels") or []:
        effort = _text(level, "effort") if isinstance(level, dict) else ""
        if effort:
            found.append(ThinkingLevel(effort, level_label(effort), _text(level, "description")))
    return Thinking(tuple(found), _text(entry, "default_reasoning_level")) if found else None


def _tiers(entry: dict[str, Any]) -> tuple[ServiceTier, ...]:
    tiers = []
    for tier in entry.get("service_tiers") or []:
        if isinstance(tier, dict) and _text(tier, "id"):
            name = _text(tier, "name") or _text(tier, "id")
            tiers.append(ServiceTier(_text(tier, "id"), name, _text(tier, "description")))
    return tuple(tiers)


def _text(entry: dict[str, Any], key: str) -> str:
    value = entry.get(key)
    return value if isinstance(value, str) else ""


def known_models() -> list[Model]:
    """Multica's list for a CLI without `debug models`: recent models and their efforts."""
    every = ("low", "medium", "high", "xhigh")

    def efforts(default: str, *more: str) -> Thinking:
        return Thinking(levels((*every, *more)), default)

    return [
        Model("gpt-5.6-sol", "GPT-5.6 Sol", "openai", True, efforts("low", "max", "ultra")),
        Model("gpt-5.6-terra", "GPT-5.6 Terra", "openai", False, efforts("medium", "max", "ultra")),
        Model("gpt-5.6-luna", "GPT-5.6 Luna", "openai", False, efforts("medium", "max")),
        Model("gpt-5.5", "GPT-5.5", "openai", False, efforts("medium")),
        Model("gpt-5.4", "GPT-5.4", "openai", False, efforts("medium")),
        Model("gpt-5.4-mini", "GPT-5.4-Mini", "openai", False, efforts("medium")),
        Model("gpt-5.3-codex", "GPT-5.3-Codex", "openai", False, efforts("medium")),
        Model("gpt-5.2", "GPT-5.2", "openai", False, efforts("medium")),
    ]
