"""Every exception the daemon raises on purpose, in one tree.

    DaemonError
    ├── ConfigError              fatal: bad environment; the CLI prints one line and exits 2
    ├── AlreadyRunningError      fatal: another daemon holds the state dir or health port; exit 1
    ├── MalformedInputError      (also a ValueError) JSON or a file from outside that is not
    │                            what it claims: not JSON, too large, nested too deep
    ├── TaskInputError           a claimed task carries what no agent may be given: that task fails
    │   └── TaskTokenError           the claimed task has no task-scoped token
    ├── AgentSetupError          the agent's setup on this machine cannot be made (a Codex
    │                            config.toml it cannot edit): that task fails
    ├── LocalDirectoryError      a project's local directory cannot be worked in as asked (not
    │                            absolute, a system root, not writable, not a repository for a
    │                            worktree): that task fails `local_directory_error`
    ├── GitError                 a git command failed: that checkout or cache sync fails
    │   └── RepoBusyError            a repository stayed locked past the wait: 503, retry later
    └── ServerError              a call to the server did not succeed
        ├── TransientServerError     transport error, 5xx, 408, 429 — retried, then raised
        │   ├── UnconfirmedError         the request may have been acted on, its answer lost
        │   │                            (a transcript batch, a claim over the control socket)
        │   └── SocketUnavailableError   the control socket could not carry a request (none
        │                                open, `rpc-v1` not said): it never left, go by HTTP
        ├── PermanentServerError     any other 4xx — never retried
        │   ├── TaskGoneError            404 "task not found": interrupt the agent
        │   └── RuntimeGoneError         404 "runtime not found": register again
        └── MalformedResponseError   2xx with a body that does not fit the protocol

A `ServerError` ends one call, never the daemon: callers log it, count it and carry on.
What nobody expected is held by a `RoundBoundary` around each round of a long-lived loop
(listen, heartbeat, renewal, workspace sync, outbox, claim): it is logged and costs that round,
never the task group the daemon runs in. Cancellation is not an `Exception` and passes.
"""

from __future__ import annotations

import logging
from types import TracebackType

log = logging.getLogger(__name__)


class DaemonError(Exception):
    """Base of every error the daemon raises on purpose."""


class ConfigError(DaemonError):
    """A configuration value is invalid; start-up stops with this message."""


class AlreadyRunningError(DaemonError):
    """Another daemon already holds the state directory or the health address."""


class MalformedInputError(DaemonError, ValueError):
    """Input from outside the daemon (a server answer, a control frame, a file another process
    could have written) is not JSON, larger than its cap or nested deeper than its limit."""


class TaskInputError(DaemonError):
    """A claimed task asks for something no agent may be given (a bad `custom_env` name):
    the task fails as invalid input, nothing starts."""


class TaskTokenError(TaskInputError):
    """A task's token is not task-scoped (`mat_`): its agent must not start with it."""


class AgentSetupError(DaemonError):
    """What the agent needs on this machine cannot be made (the task's Codex config from a
    user's config it cannot edit): the task fails, nothing starts."""


class LocalDirectoryError(DaemonError):
    """The task's local directory cannot be used as its project asks; the message says what
    the user can change (the path, the mode, the folder's owner)."""


class GitError(DaemonError):
    """A git command failed, timed out or could not start; the message says which and why."""


class RepoBusyError(GitError):
    """Another operation held the repository's cache past the caller's wait."""


class ServerError(DaemonError):
    """A server call failed; `endpoint` names the call, `status` the HTTP status if any."""

    def __init__(self, endpoint: str, message: str, status: int | None = None) -> None:
        super().__init__(f"{endpoint}: {message}" + (f" (HTTP {status})" if status else ""))
        self.endpoint = endpoint
        self.message = message
        self.status = status


class TransientServerError(ServerError):
    """The server may succeed later (transport error, 5xx, 408, 429)."""


class UnconfirmedError(TransientServerError):
    """A request may have reached the server, but its answer was lost (a read timeout, a
    connection dropped after sending, a 5xx): a transcript batch sent again could be stored
    twice where the server does not store each `seq` once; a claim made again at once could
    bring more tasks than there are free slots."""


class SocketUnavailableError(TransientServerError):
    """The control WebSocket could not carry a request: none is open, the server has not said
    `rpc-v1` on it, or it closed before the frame was written. The request never left, so it
    may be made over HTTP at once."""


class PermanentServerError(ServerError):
    """The server refused the request for good (4xx other than 408/429)."""


class TaskGoneError(PermanentServerError):
    """The server no longer knows the task: the run must stop."""


class RuntimeGoneError(PermanentServerError):
    """The server no longer knows the runtime: the daemon must register again."""


class MalformedResponseError(ServerError):
    """The server answered 2xx with a body that does not match the protocol."""


class RoundBoundary:
    """`with boundary:` around one round; logs each distinct failure with its traceback once,
    a repeat of the same failure as one line."""

    def __init__(self, loop: str) -> None:
        self.loop = loop
        self.failures = 0
        self._last = ""

    def __enter__(self) -> RoundBoundary:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        if exc is None or not isinstance(exc, Exception):
            return False
        self.failures += 1
        seen = f"{type(exc).__name__}: {exc}"[:300]
        if seen == self._last:
            log.error("%s: round failed again (%s); next round as usual", self.loop, seen)
        else:
            self._last = seen
            log.error("%s: round failed; next round as usual", self.loop, exc_info=exc)
        return True
