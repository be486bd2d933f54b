"""Oh-My-Pi's models as Multica's daemon reads them: `omp models --json`.

    {"models": [{"provider": "anthropic", "id": "claude-sonnet-5",
                 "selector": "anthropic/claude-sonnet-5", "name": "Claude Sonnet 5", …}]}

omp refuses Pi's `--list-models` (and its RPC catalog is Pi's, not the one Multica reads), so
this is its own question. A model's id is its selector (`provider/id`; built from the two
when omp gives none): `--model` takes it whole, where a bare id would let omp's provider
ranking pick another backend for the same model. The label is its name, the provider kept for
the picker's groups. Thinking levels are not read (as in Multica): a task's level is dropped.
An omp that fails, prints nothing or prints something else has no catalog.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from backends.models import EMPTY, Catalog, Model
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

log = logging.getLogger(__name__)

LIST_TIMEOUT = 15.0


async def omp_models(cli: AgentCli) -> Catalog:
    """The models `omp models --json` lists."""
    said = await ask(cli, ["models", "--json"], bound=LIST_TIMEOUT)
    if not said.ok or not said.text.strip():
        return EMPTY
    found = parse_models(said.text)
    if found is None:
        log.info("%s: `models --json` printed no catalog it reads", cli.name)
        return EMPTY
    return Catalog.of(found)


def parse_models(text: str) -> list[Model] | None:
    """The catalog of omp's JSON answer (None: not that shape)."""
    try:
        answer: Any = json.loads(text)
    except ValueError:
        return None
    listed = answer.get("models") if isinstance(answer, dict) else None
    if not isinstance(listed, list) or not all(_entry(e) for e in listed):
        return None
    models: list[Model] = []
    for entry in listed:
        bare = (entry.get("id") or "").strip()
        if not bare:
            continue
        provider = (entry.get("provider") or "").strip()
        selector = (entry.get("selector") or "").strip()
        selector = selector or (f"{provider}/{bare}" if provider else bare)
        if any(m.id == selector for m in models):
            continue
        label = (entry.get("name") or "").strip() or selector
        models.append(Model(selector, label, provider))
    return models


def _entry(entry: Any) -> bool:
    """Whether `entry` is a model object whose fields read are strings (or absent)."""
    fields = ("id", "provider", "selector", "name")
    return isinstance(entry, dict) and all(isinstance(entry.get(f), str | None) for f in fields)
