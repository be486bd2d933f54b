"""OpenClaw's catalog as Multica's daemon reads it: its agents, not models.

An OpenClaw agent is bound to its model in OpenClaw's own config, and a task picks the agent
(`--agent`, `backends.openclaw.backend`), so the picker lists agents: `openclaw agents list
--json` (2026.9.6 prints an array of `{"id", "model", "workspace", …}`; an object with an
`agents` array is read too), then the two other spellings of that flag Multica tries
(`--output json`, `-o json`). Each agent's id is what `--agent` takes, its label its `name`
(else the id) with its model in brackets, its provider `openclaw`. When no JSON comes, the
plain `agents list` is read strictly: only a row of two plain ids (`<agent> <model>`) counts,
never a header, a bullet or a box-drawing line. All of it within one 30 s bound; thinking
levels there are none (OpenClaw takes no level).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from backends.models import EMPTY, Catalog, Model, plain_id
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

LIST_TIMEOUT = 30.0
"""Seconds every question of one read may take together (the CLI starts slowly: 3-7 s)."""
JSON_ASKS = (("--json",), ("--output", "json"), ("-o", "json"))


async def openclaw_agents(cli: AgentCli) -> Catalog:
    """OpenClaw's agents, as a catalog."""
    deadline = time.monotonic() + LIST_TIMEOUT
    for flags in JSON_ASKS:
        said = await ask(cli, ["agents", "list", *flags], bound=_left(deadline))
        if not said.ok and not said.lines:
            continue
        found = parse_json(said.text)
        if found is not None:
            return Catalog.of(found)
    said = await ask(cli, ["agents", "list"], bound=_left(deadline))
    if not said.ok and not said.lines:
        return EMPTY
    return Catalog.of(parse_text(said.lines))


def parse_json(text: str) -> list[Model] | None:
    """The agents of a JSON answer: an array, or an object's `agents` array (None: neither)."""
    try:
        answer: Any = json.loads(text)
    except ValueError:
        return None
    if isinstance(answer, dict):
        answer = answer.get("agents")
    if not isinstance(answer, list) or not all(_entry(e) for e in answer):
        return None
    models: list[Model] = []
    for entry in answer:
        # `--agent` resolves an id; a name ("Sub2API OPS") would be normalised into another
        # string and miss. Older versions print a name only: then it is the id.
        agent = entry.get("id") or entry.get("name") or ""
        if not agent or any(m.id == agent for m in models):
            continue
        label = entry.get("name") or agent
        if entry.get("model"):
            label = f"{label} ({entry['model']})"
        models.append(Model(agent, label, "openclaw"))
    return models


def parse_text(lines: Iterable[str]) -> list[Model]:
    """The `<agent> <model>` rows of the plain listing, each agent once."""
    models: list[Model] = []
    for line in lines:
        words = line.split()
        if len(words) < 2 or not (plain_id(words[0]) and plain_id(words[1])):
            continue
        if all(m.id != words[0] for m in models):
            models.append(Model(words[0], f"{words[0]} ({words[1]})", "openclaw"))
    return models


def _entry(entry: Any) -> bool:
    """Whether `entry` is an agent object whose fields read are strings (or absent)."""
    fields = ("id", "name", "model")
    return isinstance(entry, dict) and all(isinstance(entry.get(f), str | None) for f in fields)


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())
