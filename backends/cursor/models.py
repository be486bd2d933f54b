"""Cursor Agent's models as Multica's daemon reads them: `cursor-agent --list-models`.

    Available models

    auto - Auto
    composer-2-fast - Composer 2 Fast (current, default)
    composer-2 - Composer 2

Each `<id> - <label>` row is a model (the header and anything whose id is not a plain id are
not), its provider `cursor`; the row whose label says `default` is the default, and the
parenthesised note is cut from the label. Cursor's catalog changes too often to be kept here,
so when the CLI cannot be run or lists nothing the answer is Multica's stand-in list (`auto`
alone), marked as such. No model has thinking levels: the CLI takes none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from backends.models import Catalog, Model, plain_id
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

LIST_TIMEOUT = 15.0
"""Seconds `--list-models` may take: it fetches the catalog over the network."""
STAND_IN = Catalog.of([Model("auto", "Auto", "cursor", default=True)], fallback=True)


async def cursor_models(cli: AgentCli) -> Catalog:
    """The models `cursor-agent --list-models` lists, else the stand-in list."""
    said = await ask(cli, ["--list-models"], bound=LIST_TIMEOUT)
    if not said.ok and not said.lines:
        return STAND_IN
    found = parse_models(said.lines)
    return Catalog.of(found) if found else STAND_IN


def parse_models(lines: Iterable[str]) -> list[Model]:
    """The `<id> - <label>` rows of the listing, each id once."""
    models: list[Model] = []
    for raw in lines:
        line = raw.strip()
        cut = line.find(" - ")
        if cut <= 0:
            continue
        model_id, label = line[:cut].strip(), line[cut + 3 :].strip()
        if not plain_id(model_id) or any(m.id == model_id for m in models):
            continue
        default = "default" in label
        note = label.find("(")
        if note > 0:
            label = label[:note].strip()
        models.append(Model(model_id, label or model_id, "cursor", default))
    return models
