"""DevEco Code's models as Multica's daemon reads them: `deveco models`, one `provider/model`
per line.

The first word of each line is a model when it has a `/` and is neither JSON, a quoted
string nor an upper-case header (`PROVIDER/MODEL`); its provider is what comes before the
`/`, its label the id. Whatever the exit, the lines printed are read; a CLI that cannot run or
lists nothing has no catalog (the model is entered by hand). DevEco's catalog says nothing of
variants here, so no model has thinking levels.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from backends.models import Catalog, Model
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

LIST_TIMEOUT = 15.0
"""Seconds `deveco models` may take: its first run may fetch the hosted catalog."""


async def deveco_models(cli: AgentCli) -> Catalog:
    """The models `deveco models` lists."""
    said = await ask(cli, ["models"], bound=LIST_TIMEOUT)
    return Catalog.of(parse_models(said.lines))


def parse_models(lines: Iterable[str]) -> list[Model]:
    """The `provider/model` ids of the listing, each once, in order."""
    models: list[Model] = []
    for line in lines:
        words = line.split()
        model_id = words[0] if words else ""
        if model_id[:1] in ("", "{", "[", '"') or "/" not in model_id:
            continue
        if model_id == model_id.upper() or any(m.id == model_id for m in models):
            continue
        provider = model_id.split("/", 1)[0]
        models.append(Model(model_id, model_id, provider))
    return models
