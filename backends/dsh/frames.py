"""DeepSeek Harness's stdio frames (protocol version 1), line by line, as the daemon's messages.

Every frame carries `"v": 1`; one of another version is a protocol error (the run fails
with it unless a result arrives). Frames of another request id are ignored.

    ready                       nothing (the runtime is up: `runtime` is "dsh")
    session                     status (carries the session id)
    text, thinking              text, thinking (`content`)
    tool_call                   tool_use: in flight until its tool_result (`arguments` is a
                                JSON string; one that is not an object is kept as `raw`)
    tool_result                 tool_result (`output`, `is_error`)
    usage                       counted per `provider/model`
    protocol_error              the run's error if no result follows (`code: message`)
    result                      result: `status` (completed, failed, cancelled, ...),
                                `output`, `error {code, message}`, `resume_rejected`;
                                closes stdin, and the runtime exits
    models, probe               nothing (the answers to `--list-models` and `--probe`)
    anything else               log naming the type (`unknown`)

A result with `resume_rejected` is the runtime saying the session to resume is gone: the
backend starts a fresh one in the same run (`backends.resume`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import from_json

from backends import api_errors
from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.json_lines import EndsWithUsage, JsonLinesParser, ended_early, int_field, str_field

PROTOCOL_VERSION = 1
PROVIDER = "dsh"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""
_QUIET = frozenset({"models", "probe"})
_COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


class DshFrameParser(EndsWithUsage, JsonLinesParser):
    """A `LineParser` for one `dsh --profile multica --stdio` process and its one request."""

    cli = "dsh"

    def __init__(
        self, request_id: str, resuming: str = "", version: str = "", tested_max: str = ""
    ) -> None:
        super().__init__(resuming, version, tested_max)
        self.request_id = request_id
        self.ready = False
        self._protocol_error = ""
        self._result: dict[str, Any] | None = None
        self._usage: dict[str, dict[str, int]] = {}

    def event(self, event: dict[str, Any]) -> ParseStep:
        """One frame as messages."""
        if event.get("v") != PROTOCOL_VERSION:
            self._protocol_error = f"dsh returned unsupported protocol version {event.get('v')!r}"
            return ParseStep(
                messages=[Message(MessageType.ERROR, content=self._protocol_error, is_error=True)]
            )
        request = str_field(event.get("request_id"))
        if request and request != self.request_id:
            return ParseStep()
        kind = str_field(event.get("type"))
        content = str_field(event.get("content"))
        if kind == "ready":
            self.ready = event.get("runtime") == "dsh"
            return ParseStep()
        if kind == "session":
            self.session_id = str_field(event.get("session_id"))
            said = f"DeepSeek Harness session {self.session_id}"
            return ParseStep(
                messages=[Message(MessageType.STATUS, content=said, session_id=self.session_id)]
            )
        if kind in ("text", "thinking"):
            kind_of = MessageType.TEXT if kind == "text" else MessageType.THINKING
            return ParseStep(messages=[Message(kind_of, content=content)] if content else [])
        if kind == "tool_call":
            return ParseStep(messages=[_tool_call(event)])
        if kind == "tool_result":
            result = Message(
                MessageType.TOOL_RESULT,
                tool=str_field(event.get("name")),
                call_id=str_field(event.get("call_id")),
                output=str_field(event.get("output")),
                is_error=event.get("is_error") is True,
            )
            return ParseStep(messages=[result])
        if kind == "usage":
            self._count(event)
            return ParseStep()
        if kind == "protocol_error":
            said = f"{str_field(event.get('code'))}: {str_field(event.get('message'))}"
            self._protocol_error = said.strip(": ")
            return ParseStep(
                messages=[Message(MessageType.ERROR, content=self._protocol_error, is_error=True)]
            )
        if kind == "result":
            return self._on_result(event)
        if kind in _QUIET:
            return ParseStep()
        return self.unknown(f"dsh frame: {kind}")

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: the `result` frame decides; without one the run failed."""
        result = self._result
        if result is None:
            early = ended_early(self.cli, "its result", exit_code, stderr_tail, "", self.session_id)
            error = early.error
            if self._protocol_error:
                error = f"{self._protocol_error}; {error}"
            elif not self.ready:
                error = f"dsh exited before the runtime protocol became ready; {error}"
            return self.result_of(
                RunStatus.FAILED,
                exit_code,
                error=error,
            )
        status = str_field(result.get("status"))
        session = str_field(result.get("session_id")) or self.session_id
        if status == "completed":
            return self.result_of(
                RunStatus.COMPLETED,
                exit_code,
                output=str_field(result.get("output")),
                session_id=session,
            )
        error = _error_text(result) or f"dsh ended the request as {status or 'unknown'}"
        return self.result_of(
            RunStatus.FAILED,
            exit_code,
            error=error,
            session_id=session,
            reason=api_errors.failure_reason(_error_words(result)),
        )

    def usage(self) -> tuple[Usage, ...]:
        """The run's usage, per `provider/model`."""
        return tuple(
            Usage(PROVIDER, model, **counts)
            for model, counts in sorted(self._usage.items())
            if any(counts.values())
        )

    def _count(self, event: Mapping[str, Any]) -> None:
        model, provider = str_field(event.get("model")), str_field(event.get("provider"))
        key = f"{provider}/{model}" if provider else model
        if not key:
            return
        counts = self._usage.setdefault(key, dict.fromkeys(_COUNTS, 0))
        for name in _COUNTS:
            counts[name] += int_field(event.get(name))

    def _on_result(self, event: dict[str, Any]) -> ParseStep:
        if self._result is not None:
            return ParseStep(messages=[Message(MessageType.LOG, content="dsh sent another result")])
        if self.resuming and event.get("resume_rejected") is True:
            # The session is gone; the backend starts a fresh one instead.
            self.session_not_found = True
            return ParseStep(close_stdin=True)
        self._result = event
        failed = str_field(event.get("status")) != "completed"
        output = str_field(event.get("output"))
        message = Message(
            MessageType.RESULT,
            content=_error_text(event) if failed else output,
            output="" if failed else output,
            session_id=str_field(event.get("session_id")) or self.session_id,
            is_error=failed,
            usage=self.usage(),
        )
        return ParseStep(messages=[message], close_stdin=True)


def _tool_call(event: Mapping[str, Any]) -> Message:
    raw = str_field(event.get("arguments"))
    found: Any = {}
    if raw:
        try:
            found = from_json(raw)
        except ValueError:
            found = None
    return Message(
        MessageType.TOOL_USE,
        tool=str_field(event.get("name")),
        call_id=str_field(event.get("call_id")),
        input=found if isinstance(found, dict) else {"raw": raw},
    )


def _error_words(event: Mapping[str, Any]) -> str:
    """The provider's words in a result's error (the code is dsh's own)."""
    error = event.get("error")
    return str_field(error.get("message")) if isinstance(error, dict) else ""


def _error_text(event: Mapping[str, Any]) -> str:
    error = event.get("error")
    if not isinstance(error, dict):
        return ""
    return f"{str_field(error.get('code'))}: {str_field(error.get('message'))}".strip(": ")
