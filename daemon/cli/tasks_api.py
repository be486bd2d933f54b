"""Client of the reference server's user task API (`/api/tasks`), used by `submit --wait`.

These calls come from a person at a terminal, not from the daemon's loops, so the retry here is
deliberately simple: transport errors are tried three times (`TRANSPORT_RETRY`); HTTP errors are
raised at once as the `ServerError` they stand for. A create is retried only when the request
never left (a connect failure), so a lost answer can never create the task twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from daemon.errors import MalformedResponseError, TransientServerError
from daemon.protocol.models import Agent
from daemon.protocol.retry import RetryPolicy
from daemon.protocol.wire import answer_json, describe_transport_error, error_for_response

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
TRANSPORT_RETRY = RetryPolicy((0.5, 1.0), jitter=0.0)
"""Three tries in all, 0.5 s then 1 s apart, for transport errors only."""


def _path(task_id: str, action: str = "") -> str:
    base = f"/api/tasks/{quote(task_id, safe='')}"
    return f"{base}/{action}" if action else base


class TasksApi:
    """Create, follow, list and cancel tasks on the reference server."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        retry: RetryPolicy = TRANSPORT_RETRY,
    ) -> None:
        self._http = http
        self._retry = retry

    async def create_task(
        self,
        prompt: str,
        backend: str | None = None,
        workspace_id: str | None = None,
        agent: Agent | Mapping[str, Any] | None = None,
        prior_session_id: str | None = None,
        repos: Sequence[str] = (),
    ) -> dict[str, Any]:
        """Queue a task with this prompt (and the repositories its agent may check out);
        returns the task as the server stored it."""
        body: dict[str, Any] = {"prompt": prompt}
        if repos:
            body["repos"] = [{"url": url} for url in repos]
        if prior_session_id:
            body["prior_session_id"] = prior_session_id
        if backend:
            body["backend"] = backend
        if workspace_id:
            body["workspace_id"] = workspace_id
        if agent is not None:
            body["agent"] = (
                agent.model_dump(mode="json") if isinstance(agent, Agent) else dict(agent)
            )
        data = await self._request("create_task", "POST", "/api/tasks", json=body, safe=False)
        return _object("create_task", data)

    async def get_task(self, task_id: str) -> dict[str, Any]:
        """The task with its status, output, error, failure reason and timestamps."""
        return _object("get_task", await self._request("get_task", "GET", _path(task_id)))

    async def messages(self, task_id: str, after_seq: int | None = None) -> list[dict[str, Any]]:
        """The task's transcript in seq order; only messages after `after_seq` if given."""
        params = {} if after_seq is None else {"after_seq": str(after_seq)}
        data = await self._request("messages", "GET", _path(task_id, "messages"), params=params)
        items = _objects("messages", data, "messages")
        if after_seq is not None:  # a server that ignores the parameter must not repeat lines
            items = [m for m in items if _seq(m) > after_seq]
        return sorted(items, key=_seq)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        """Cancel the task; returns it (now `cancelled`, or already terminal)."""
        return _object("cancel", await self._request("cancel", "POST", _path(task_id, "cancel")))

    async def list_tasks(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every task, or only those with this status."""
        params = {} if status is None else {"status": status}
        data = await self._request("list_tasks", "GET", "/api/tasks", params=params)
        return _objects("list_tasks", data, "tasks")

    async def _request(
        self,
        endpoint: str,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        safe: bool = True,
    ) -> Any:
        failures = 0
        while True:
            try:
                response = await self._http.request(method, path, json=json, params=params)
            except httpx.RequestError as exc:
                retryable = isinstance(exc, _NOT_SENT) or (
                    safe
                    and isinstance(exc, httpx.TransportError)
                    and not isinstance(exc, httpx.UnsupportedProtocol)
                )
                failures += 1
                delay = self._retry.delay(failures)
                if not retryable or delay is None:
                    raise TransientServerError(endpoint, describe_transport_error(exc)) from exc
                await self._retry.sleep(delay)
                continue
            if not response.is_success:
                raise error_for_response(endpoint, response)
            try:
                return answer_json(response)
            except ValueError as exc:
                raise MalformedResponseError(endpoint, str(exc), response.status_code) from None


def _seq(message: Mapping[str, Any]) -> int:
    seq = message.get("seq")
    return seq if isinstance(seq, int) else -1


def _object(endpoint: str, data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise MalformedResponseError(endpoint, "expected a JSON object")
    return data


def _objects(endpoint: str, data: Any, key: str) -> list[dict[str, Any]]:
    # A bare list is the usual answer; `{"<key>": [...]}` is accepted as well.
    if isinstance(data, dict) and isinstance(data.get(key), list):
        data = data[key]
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise MalformedResponseError(endpoint, "expected a JSON list of objects")
    return data
