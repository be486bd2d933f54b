"""The models an ACP agent offers, read as Multica's daemon reads them: a short run of the
CLI through `initialize` and `session/new` (in a directory of its own), whose answer lists
them under `models.availableModels` (`currentModelId` the default) or, in newer agents, as
the `model` entry of `configOptions`.

An agent whose session also advertises an effort option (`effort.py`) has that option's
levels as the thinking levels of the model the session is on, and of no other: the option
describes the session's current model only (Reasonix, for one, offers other levels per
model). Every request the agent makes of us meanwhile is refused at once, so it never
waits; the CLI's stdin is closed once `session/new` is answered.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backends.acp import rpc
from backends.acp.effort import config_options, current_value, effort_option
from backends.base import ParseStep, RunResult, RunStatus
from backends.json_lines import str_field
from backends.models import Model, Thinking
from backends.probe import ask

if TYPE_CHECKING:
    from backends.agent_cli import AgentCli

log = logging.getLogger(__name__)

_CLIENT = {"name": "multica-model-discovery", "version": "0.1.0"}


class Handshake:
    """The conversation: `initialize`, then `session/new` once it is answered."""

    def __init__(self, cwd: Path) -> None:
        self._cwd = str(cwd)
        self.session: dict[str, Any] | None = None
        """The `session/new` result (None: the agent did not get that far)."""
        self.error = ""

    def opening(self) -> bytes:
        params = {"protocolVersion": 1, "clientInfo": _CLIENT, "clientCapabilities": {}}
        return rpc.request(1, "initialize", params)

    def feed(self, line: str) -> ParseStep:
        frame = rpc.read_frame(line)
        if frame is None:
            return ParseStep()
        if frame.kind == "request":
            refusal = rpc.refusal(frame.id, rpc.METHOD_NOT_FOUND, "model discovery only")
            return ParseStep(replies=[refusal])
        if frame.kind != "answer":
            return ParseStep()
        if frame.error is not None:
            self.error = rpc.describe_error(frame.error)
            return ParseStep(close_stdin=True)
        if frame.id == 1:
            params = {"cwd": self._cwd, "mcpServers": []}
            return ParseStep(replies=[rpc.request(2, "session/new", params)])
        if frame.id == 2:
            self.session = frame.result if isinstance(frame.result, dict) else {}
            return ParseStep(close_stdin=True)
        return ParseStep()

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        ok = self.session is not None
        return RunResult(RunStatus.COMPLETED if ok else RunStatus.FAILED, error=self.error)


async def session_models(
    cli: AgentCli, acp_args: Sequence[str], *, effort: bool = False
) -> list[Model] | None:
    """The models `cli`'s ACP session offers (None: the handshake failed, or its answer
    carries no catalog); with `effort`, the current model's levels from the effort option."""
    session = await new_session(cli, acp_args)
    if session is None:
        return None
    models = parse_models(session)
    if models is None:
        log.info("%s: session/new lists no models (keys: %s)", cli.name, sorted(session))
        return None
    option = effort_option(session) if effort else None
    if option is None or not option.levels:
        return models
    thinking = Thinking(option.levels, option.current)
    return [
        Model(m.id, m.label, m.provider, m.default, thinking) if m.default else m for m in models
    ]


async def new_session(cli: AgentCli, acp_args: Sequence[str]) -> dict[str, Any] | None:
    """The answer to `session/new` of a short ACP run of `cli` (None: it gave none)."""
    talks: list[Handshake] = []

    def talk(cwd: Path) -> Handshake:
        talks.append(Handshake(cwd))
        return talks[-1]

    await ask(cli, acp_args, talk=talk)
    session = talks[0].session if talks else None
    if session is None:
        why = talks[0].error if talks and talks[0].error else "no answer to session/new"
        log.info("%s: model discovery over ACP failed: %s", cli.name, why)
    return session


def parse_models(result: Mapping[str, Any]) -> list[Model] | None:
    """The catalog of a `session/new` answer: `models.availableModels` first, the `model`
    config option when that lists none; None when the answer has neither."""
    block = result.get("models")
    found: list[Model] | None = None
    if isinstance(block, dict):
        listed = block.get("availableModels") or block.get("available_models") or []
        current = str_field(block.get("currentModelId")) or str_field(block.get("current_model_id"))
        found = []
        for entry in listed if isinstance(listed, list) else []:
            if not isinstance(entry, dict):
                continue
            model_id = (str_field(entry.get("modelId")) or str_field(entry.get("model_id"))).strip()
            _add(found, model_id, str_field(entry.get("name")), current.strip())
        if found:
            return found
    for option in config_options(result):
        marks = {str_field(option.get("id")).lower(), str_field(option.get("category")).lower()}
        if "model" not in marks:
            continue
        current = current_value(option)
        from_option: list[Model] = []
        for choice in option.get("options") or []:
            if isinstance(choice, dict):
                value = str_field(choice.get("value")).strip()
                _add(from_option, value, str_field(choice.get("name")), current)
        if from_option:
            return from_option
    return found


def _add(models: list[Model], model_id: str, name: str, current: str) -> None:
    """One entry, once; its provider only from the `provider:model` form."""
    if not model_id or any(m.id == model_id for m in models):
        return
    colon = model_id.find(":")
    provider = model_id[:colon] if colon > 0 else ""
    label = name.strip()
    if not label or label.lower() == "unknown":
        label = model_id
    models.append(Model(model_id, label, provider, model_id == current))
