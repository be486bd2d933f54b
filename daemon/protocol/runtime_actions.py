"""Answers to the actions a heartbeat hands a runtime (`pending_*`), and the token renewal.

A model list is answered with the runtime's catalog, as its CLI gives it (the worker's
`models`, daemon/catalogs.py), within seconds; local skills are read from this machine
(`daemon.local_skills`: the list with the MCP servers, or one skill's bundle for an import).
Self-update this daemon does not do, so it answers that the way an older Multica daemon
without the feature would: a `failed` result saying so (so is a model list when no catalog
is given). Without an answer the server's request would sit `running` until its own timeout
and the UI would say the daemon did not respond.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
from anyio.abc import TaskGroup

from daemon.errors import ServerError, TransientServerError
from daemon.protocol.client import ServerClient
from daemon.protocol.runtime_models import HeartbeatResponse, PendingAction, RenewResponse
from daemon.protocol.wire import ignore_body, parse_model

if TYPE_CHECKING:
    from daemon.local_skills.reader import LocalInventory

log = logging.getLogger(__name__)

RENEW_PATH = "/api/tokens/current/renew"
_REMEMBERED = 256
"""Answered request ids kept, so a server that repeats an action is answered once."""
PER_HEARTBEAT = 16
"""Actions being answered at most (taken from heartbeat answers), against a server that hands
out thousands; more are left unanswered. Multica marks what it hands out running and never
hands it out again, so this is at least the most one of its answers carries: a batch of 10
local skill imports (`maxLocalSkillImportBatch`, asked for with `supports_batch_import`) and
one each of update, model list and local skills."""
RESULT_RETRIES = (0.0, 0.5, 2.0, 4.0)
"""A result the server failed to store (a 5xx, a lost connection) is sent again after these
waits, as Multica's daemon does: within the server's 60 s, not left `running` until then."""
AT_ONCE = 2
"""Answers in flight at once: the HTTP pool's other connections stay free for claims,
heartbeats and reports, however many actions a server hands out."""


Body = dict[str, Any] | Callable[[], Awaitable[dict[str, Any]]]
"""A result, or how to make it (read when the answer is due, not in the heartbeat)."""


def _failed(what: str) -> dict[str, Any]:
    return {"status": "failed", "error": f"{what} is not supported by agent-daemon"}


class PendingActions:
    """Answers each pending action of a heartbeat once, without delaying the heartbeat."""

    def __init__(
        self,
        client: ServerClient,
        inventory: LocalInventory | None = None,
        models: Callable[[str], Awaitable[dict[str, Any]]] | None = None,
    ) -> None:
        """`inventory` reads local skills (None: this machine reports none); `models`: a
        runtime's model-list result, by runtime id (None: not supported)."""
        self._client = client
        self._inventory = inventory
        self._models = models
        self._answered: OrderedDict[str, None] = OrderedDict()
        self._limiter = anyio.CapacityLimiter(AT_ONCE)
        self._in_flight = 0

    def handle(
        self, tg: TaskGroup, runtime_id: str, provider: str, beat: HeartbeatResponse
    ) -> None:
        """Start the answer of every action in `beat` not answered before."""
        # The batch field is the newer server's; the single one is only read without it.
        imports = beat.pending_local_skill_imports or [
            i for i in (beat.pending_local_skill_import,) if i is not None
        ]
        models: Body = _failed("model discovery")
        if self._models is not None:
            read = self._models
            models = lambda: read(runtime_id)  # noqa: E731 - read when the answer is due
        answers: list[tuple[str, PendingAction | None, Body]] = [
            ("update", beat.pending_update, _failed("self-update")),
            ("models", beat.pending_model_list, models),
            ("local-skills", beat.pending_local_skills, self._listing(provider)),
            *(("local-skills/import", i, self._bundle(provider, i.skill_key)) for i in imports),
        ]
        for n, (kind, action, body) in enumerate(answers):
            if action is None or not action.id or f"{kind}/{action.id}" in self._answered:
                continue
            if self._in_flight >= PER_HEARTBEAT:
                # Not marked answered: a later heartbeat hands them out again.
                log.warning(
                    "runtime %s: %d pending actions left for later heartbeats (%d at a time)",
                    runtime_id,
                    len(answers) - n,
                    PER_HEARTBEAT,
                )
                break
            self._seen(f"{kind}/{action.id}")
            self._in_flight += 1
            tg.start_soon(self._answer, runtime_id, kind, action, body)

    def _listing(self, provider: str) -> Body:
        inventory = self._inventory
        if inventory is None:
            none = {"skills": [], "supported": False, "mcp_servers": [], "mcp_supported": False}
            return {"status": "completed", **none}
        return lambda: inventory.listing(provider)

    def _bundle(self, provider: str, key: str) -> Body:
        inventory = self._inventory
        if inventory is None:
            said = f'provider "{provider}" does not expose runtime local skills'
            return {"status": "failed", "error": said}
        return lambda: inventory.bundle(provider, key)

    def _seen(self, key: str) -> bool:
        if key in self._answered:
            return True
        self._answered[key] = None
        while len(self._answered) > _REMEMBERED:
            self._answered.popitem(last=False)
        return False

    async def _answer(self, runtime_id: str, kind: str, action: PendingAction, body: Body) -> None:
        rid, request = quote(runtime_id, safe=""), quote(action.id, safe="")
        path = f"/api/daemon/runtimes/{rid}/{kind}/{request}/result"
        try:
            sent = body if isinstance(body, dict) else await body()
            log.info(
                "runtime %s: pending %s %s answered: %s",
                runtime_id,
                kind,
                action.id,
                _summary(sent),
            )
            for wait in RESULT_RETRIES:
                await anyio.sleep(wait)
                try:
                    async with self._limiter:
                        await self._client.post(f"result_{kind}", path, sent, ignore_body)
                    break
                except TransientServerError as exc:
                    if wait == RESULT_RETRIES[-1]:
                        raise
                    log.info(
                        "runtime %s: result of %s not taken (%s): again", runtime_id, kind, exc
                    )
        except ServerError as exc:
            log.warning(
                "runtime %s: result of %s %s not sent: %s", runtime_id, kind, action.id, exc
            )
        finally:
            self._in_flight -= 1


def _summary(body: dict[str, Any]) -> str:
    """What the log says of a result: its status and counts, never a skill's content nor
    every model of a list (it may hold hundreds)."""
    said = [str(body.get("status"))]
    if body.get("error"):
        said.append(str(body["error"]))
    for field in ("skills", "mcp_servers", "models"):
        if isinstance(body.get(field), list):
            said.append(f"{len(body[field])} {field}")
    if isinstance(body.get("skill"), dict):
        said.append(f"skill {body['skill'].get('name')!r}")
    return ", ".join(said)


async def renew_token(client: ServerClient) -> RenewResponse:
    """Ask the server to extend the daemon's login token (it decides whether it is due)."""
    return await client.post("renew", RENEW_PATH, {}, parse_model(RenewResponse))
