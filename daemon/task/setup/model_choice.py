"""The model, thinking level and service tier a task's agent runs with, settled against its
CLI's catalog before the agent starts, as Multica's daemon settles them.

The server accepts any level its provider knows of; whether the level fits the model is known
only here, from the CLI's own catalog (Claude's `xhigh` is Opus's alone, each Codex model has
its own efforts). A level or tier that does not fit is dropped with a warning — the task runs
on the CLI's default, never fails for a stale setting — and one that cannot be checked (the
catalog could not be read) is passed on for the CLI to judge. Codex's default model is its
configuration's, which may be any model: no level or tier is given without a model named.
The catalog is read at most once per task, and only when something depends on it: a level or
tier set, or the model of OpenCode or its fork DevEco Code, whose CLIs take one only as
`provider/model` (a bare id one provider's catalog entry claims is completed).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from backends.agent_cli import AgentCli
from backends.base import Backend
from backends.models import qualified, valid_service_tier, valid_thinking
from daemon.catalogs import ModelCatalogs
from daemon.logs import short_id
from daemon.protocol.models import Task

log = logging.getLogger(__name__)

_QUALIFIED_ONLY = frozenset({"opencode", "deveco"})
"""Families whose CLI takes a model only as `provider/model`."""


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """What the agent is started with ("": the CLI's own default)."""

    model: str = ""
    thinking_level: str = ""
    service_tier: str = ""


async def choose(task: Task, backend: Backend, catalogs: ModelCatalogs) -> ModelChoice:
    """The task's model, level and tier as they fit the backend's catalog."""
    family, which = backend.name, short_id(task.id)
    model = task.agent.model or (backend.model if isinstance(backend, AgentCli) else "")
    level, tier = task.agent.thinking_level, task.agent.service_tier
    if tier and (family != "codex" or not model):
        _dropped(which, "service tier", tier, family, model)
        tier = ""
    if level and family == "codex" and not model:
        _dropped(which, "thinking level", level, family, model)
        level = ""
    if not (level or tier or (model and family in _QUALIFIED_ONLY)):
        return ModelChoice(task.agent.model, level, tier)
    try:
        catalog = await catalogs.of(backend)
    except Exception as exc:  # a discovery bug leaves the choice to the CLI, as a failed read
        log.warning("task %s: %s's models not read (%s): its own judge", which, family, exc)
        return ModelChoice(task.agent.model, level, tier)
    named = qualified(catalog, model) if model else ""
    if named != model:
        log.info("task %s: model %r is %r in %s's catalog", which, model, named, family)
    if tier and not valid_service_tier(catalog, family, named, tier):
        _dropped(which, "service tier", tier, family, named)
        tier = ""
    if level and not valid_thinking(catalog, family, named, level):
        _dropped(which, "thinking level", level, family, named)
        level = ""
    return ModelChoice(named if named != model else task.agent.model, level, tier)


def _dropped(which: str, what: str, value: str, family: str, model: str) -> None:
    log.warning(
        "task %s: %s %r does not fit %s model %r: not applied",
        which,
        what,
        value,
        family,
        model or "(the CLI's default)",
    )
