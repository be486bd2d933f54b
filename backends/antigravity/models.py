"""Antigravity's models as Multica's daemon reads them: `agy models`.

agy 1.1.11 prints `id<TAB>label` per model; older versions print the id alone, which is then
its label too. Blank lines and repeated ids are skipped; the provider is `antigravity`. agy
takes a model it does not know without a word and runs nothing, so no list is guessed: when
the CLI cannot be run or prints nothing, there is no catalog (the model is entered by hand,
or left to agy). No model has thinking levels: agy takes none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from backends.models import EMPTY, Catalog, Model
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

LIST_TIMEOUT = 10.0
"""Seconds `agy models` may take: it reads a local list, a cold start aside."""


async def antigravity_models(cli: AgentCli) -> Catalog:
    """The models `agy models` lists (none when it could not say)."""
    said = await ask(cli, ["models"], bound=LIST_TIMEOUT)
    if not said.ok and not said.lines:
        return EMPTY
    return Catalog.of(parse_models(said.lines))


def parse_models(lines: Iterable[str]) -> list[Model]:
    """One model per line: `id<TAB>label[<TAB>…]`, or the id alone."""
    models: list[Model] = []
    for line in lines:
        model_id = label = line.strip()
        if "\t" in line:
            first, rest = line.split("\t", 1)
            model_id = first.strip()
            label = rest.split("\t", 1)[0].strip() or model_id
        if model_id and all(m.id != model_id for m in models):
            models.append(Model(model_id, label, "antigravity"))
    return models
