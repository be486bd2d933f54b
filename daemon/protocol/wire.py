"""HTTP plumbing shared by the server clients: the protocol's headers, paths, how an answer is
read, and what a failure means.

`error_for_response` is the one place that maps a non-2xx answer onto daemon/errors.py
(5xx, 408 and 429 are transient; 404 "task not found" / "runtime not found" are the
task or runtime gone; every other status is permanent).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import TypeAdapter, ValidationError

from daemon.errors import (
    MalformedInputError,
    PermanentServerError,
    RuntimeGoneError,
    ServerError,
    TaskGoneError,
    TransientServerError,
)
from daemon.protocol import jsonin
from daemon.protocol.answers import Answered
from daemon.protocol.models import Task, WireModel
from daemon.protocol.release import cli_version
from daemon.protocol.runtime_models import Workspace

M = TypeVar("M", bound=WireModel)
_WORKSPACES = TypeAdapter(list[Workspace])

DAEMON_ID_HEADER = "X-Daemon-ID"
"""Names the daemon behind a request; the embedded server lets only a task's claimant report it."""
DEDUPE_HEADER = "X-Message-Dedupe"
"""On a messages answer, `seq`: the server stores each (task, seq) once, so a re-send is safe."""
TASK_STATUS_HEADER = "X-Task-Status"
"""On a messages answer, the task's status then (this project's server; Multica sends none)."""
_ERROR_TEXT_LIMIT = 300


def client_os() -> str:
    """This machine's OS as the protocol names it: `linux`, `macos` or `windows`."""
    if sys.platform == "darwin":
        return "macos"
    if sys.platform.startswith("win"):
        return "windows"
    return "linux" if sys.platform.startswith("linux") else sys.platform


CAPABILITIES = ("skill-bundles-v1", "coalesced-comments-v1", "rpc-v1", "local-worktree-v1")
"""What this daemon tells the server it handles (`X-Client-Capabilities`, as Multica's daemon
sends it on every request and the control WebSocket). Each name changes what a claim carries
or how it travels, so only what is implemented is named: `skill-bundles-v1` — skills by
reference, resolved through `skill-bundles/resolve` (daemon/task/setup/skill_bundles.py);
`coalesced-comments-v1` — the comments folded into a queued run come one by one with their
threads (`coalesced_comments`), each answered in its own thread
(daemon/task/setup/comment_prompt.py); without it the server folds them into the one trigger
comment; `rpc-v1` — requests (claims) on the control WebSocket (daemon/protocol/control_rpc.py),
made only once the server's own heartbeat ack says it too; `local-worktree-v1` — a project's
local directory in worktree mode runs in a worktree of its own (daemon/task/localdir/); without
it the server cancels such a task rather than let it run in place. Not named: Multica's
ungated `execution-manifest-v1`, `agent-skill-v1` and `remote-mcp-v1` (the server sends plugin
tools and remote MCP connections to every daemon; daemon/task/mcp/ serves them). No capability
names the repository checkout route."""


def protocol_headers(token: str, version: str) -> dict[str, str]:
    """The headers every request carries, HTTP and the control WebSocket alike."""
    headers = {
        "X-Client-Platform": "daemon",
        # What Multica logs as the client's version: the same string as `cli_version`.
        "X-Client-Version": cli_version(version),
        "X-Client-OS": client_os(),
        "X-Client-Capabilities": ",".join(CAPABILITIES),
        "User-Agent": f"agent-daemon/{version}",
    }
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def error_for_response(endpoint: str, response: Answered) -> ServerError:
    """The `ServerError` a non-2xx response stands for (daemon/errors.py)."""
    return error_for_status(endpoint, response.status_code, error_text(response))


def error_for_status(endpoint: str, status: int, text: str) -> ServerError:
    """The `ServerError` a non-2xx status with this error text stands for, however it came."""
    text = " ".join(text.split())[:_ERROR_TEXT_LIMIT] or "no error text"
    if status >= 500 or status in (408, 429):
        return TransientServerError(endpoint, text, status)
    if status == 404:
        lowered = text.lower()
        if "task not found" in lowered:
            return TaskGoneError(endpoint, text, status)
        if "runtime not found" in lowered:
            return RuntimeGoneError(endpoint, text, status)
    return PermanentServerError(endpoint, text, status)


def refuses_task(exc: ServerError) -> bool:
    """Whether the server refuses anything about this task: it is gone (404, 410), or the
    daemon's token is refused (401) or not the task's holder (403). Any other 4xx (400, 413,
    422, ...) is about what the request held."""
    return isinstance(exc, TaskGoneError) or exc.status in (401, 403, 404, 410)


def error_text(response: Answered) -> str:
    """The server's `{"error": ...}` text, else the start of the body, else the reason."""
    text = ""
    try:
        body = answer_json(response)
    except ValueError:
        text = response.text
    else:
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            text = body["error"]
        else:
            text = response.text
    text = " ".join(text.split())[:_ERROR_TEXT_LIMIT]
    return text or response.reason_phrase or "no error text"


def describe_transport_error(exc: httpx.RequestError) -> str:
    """A short text for a transport error (its class name says most: ConnectError, ...)."""
    detail = " ".join(str(exc).split())[:_ERROR_TEXT_LIMIT]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def describe_parse_error(exc: ValueError) -> str:
    """Why a 2xx body did not parse, naming fields but never their values."""
    # Never the offending input: a malformed task may carry its auth token.
    if isinstance(exc, ValidationError):
        problems = [
            f"{'.'.join(str(p) for p in err['loc']) or 'body'}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)[:3]
        ]
        more = f" (+{exc.error_count() - 3} more)" if exc.error_count() > 3 else ""
        return "; ".join(problems) + more
    if isinstance(exc, MalformedInputError):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return "body is not JSON"
    if isinstance(exc, UnicodeDecodeError):
        return "body is not UTF-8"
    return " ".join(str(exc).split())[:_ERROR_TEXT_LIMIT]


def answer_json(response: Answered) -> Any:
    """The JSON of an answer's body, read through the one bounded reader (jsonin)."""
    return jsonin.loads(response.content, what="the answer")


def parse_model(model: type[M]) -> Callable[[Answered], M]:
    """A parser of a 2xx answer into `model`."""
    return lambda response: model.model_validate(answer_json(response))


def ignore_body(response: Answered) -> None:
    """The parser of an answer whose body does not matter."""
    return None


def task_path(task_id: str, action: str) -> str:
    """The path of one task's endpoint."""
    # Quoted so a task id can never reach another path of the API.
    return f"/api/daemon/tasks/{quote(task_id, safe='')}/{action}"


def parse_workspaces(response: Answered) -> list[Workspace]:
    """The workspaces in a 2xx answer."""
    return _WORKSPACES.validate_python(answer_json(response))


def parse_claim(response: Answered) -> tuple[list[Task], list[tuple[str, str]]]:
    """The tasks of a claim answer, and (id, reason) for each task that does not parse."""
    return claim_tasks(answer_json(response))


def claim_tasks(data: Any) -> tuple[list[Task], list[tuple[str, str]]]:
    """The tasks of a claim answer's decoded body (over HTTP or the control WebSocket), and
    (id, reason) for each task that does not parse."""
    if not isinstance(data, dict) or "tasks" not in data:
        raise ValueError("a claim answer is an object with `tasks`")
    raw = data["tasks"]
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        raise ValueError("`tasks` is not a list")
    tasks: list[Task] = []
    rejected: list[tuple[str, str]] = []
    for item in raw:
        try:
            tasks.append(Task.model_validate(item))
        except ValidationError as exc:
            task_id = item.get("id") if isinstance(item, dict) else None
            ident = str(task_id) if isinstance(task_id, str | int) else ""
            rejected.append((ident, describe_parse_error(exc)))
    return tasks, rejected
