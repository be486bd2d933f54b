"""Copilot's `--output-format json` events, line by line, as the daemon's message model.

Each line is an envelope `{"type": "dotted.name", "data": {...}, "ephemeral": bool, ...}`; the
last is a `result` line with `sessionId` and `exitCode` at the top level.

    session.start               status (carries the session id and the model)
    assistant.turn_start        status (a sign of life before the model's first word)
    assistant.message           thinking (its `reasoningText`), text (its `content`); its
                                `toolRequests` are kept for the tool calls they announce
    assistant.reasoning         thinking
    tool.execution_start        tool_use: the tool is in flight from here (call id, arguments)
    tool.execution_complete     tool_result (a tool_use first if its start was never seen)
    assistant.usage             usage of one model call;  session.shutdown  the session's totals
    model.call_failure          nothing yet: kept for why the run fails, if it does
    assistant.turn_retry        status (the CLI retries a failed model call, and why)
    session.error               error (why the run failed: `backends.copilot.failure`)
    session.warning             log
    result                      the run's end: the session id, the CLI's exit code
    deltas, turn and call       nothing: the complete message follows each stream of deltas,
    markers, loaded skills …    and the rest is the CLI's bookkeeping
    anything else               log naming the type (`unknown`; a run of only such lines fails)

The output is the last complete assistant message — or, when the run died while a message
streamed, that message's deltas so far.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus
from backends.copilot.failure import failure_reason
from backends.copilot.usage import CopilotUsage
from backends.json_lines import JsonLinesParser, ended_early, int_field, str_field
from backends.resume import fresh_session_notice

# What `copilot --resume` prints (stderr) when the session to resume does not exist.
SESSION_MISSING = ("No session, task, or name matched",)
# Known events that say nothing the transcript needs.
_QUIET = frozenset(
    {
        "assistant.turn_end",
        "assistant.message_start",
        "assistant.message_delta",
        "assistant.reasoning_delta",
        "assistant.tool_call_delta",
        "assistant.idle",
        "user.message",
        "model.call_start",
        "model.call_finished",
        "model.call_final_result",
        "tool.shell_output",
        "tool.execution_partial_result",
        "session.skills_loaded",
        "session.mcp_servers_loaded",
        "session.tools_updated",
        "session.background_tasks_changed",
        "session.info",
        "session.model_change",
    }
)


class CopilotEventParser(JsonLinesParser):
    """A `LineParser` for one `copilot --output-format json` process (prompt mode)."""

    cli = "copilot"
    missing_session_markers = SESSION_MISSING

    def __init__(
        self, model: str = "", resuming: str = "", version: str = "", tested_max: str = ""
    ) -> None:
        super().__init__(resuming, version, tested_max, model=model or "copilot")
        self.usage = CopilotUsage(resumed=bool(resuming))
        self._last_text = ""
        self._streaming = ""
        self._requested: dict[str, dict[str, Any]] = {}
        self._started: set[str] = set()
        self._error: dict[str, Any] | None = None
        self._failed_call: dict[str, Any] | None = None
        self._exit: int | None = None

    def event(self, event: dict[str, Any]) -> ParseStep:
        """One event as messages (or the run's end)."""
        kind = str_field(event.get("type"))
        raw = event.get("data")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if kind == "result":
            self.session_id = str_field(event.get("sessionId")) or self.session_id
            code = event.get("exitCode")
            self._exit = code if isinstance(code, int) and not isinstance(code, bool) else 0
            return ParseStep()
        if kind in _QUIET:
            if kind == "assistant.message_delta":
                self._streaming += str_field(data.get("deltaContent"))
            return ParseStep()
        handler = _HANDLERS.get(kind)
        if handler is None:
            return self.unknown(f"copilot event: {kind}")
        return ParseStep(messages=handler(self, data))

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: its `result` line decides; without one the run failed."""
        if self.resuming and not self.session_id and self.says_session_missing(stderr_tail):
            self.session_not_found = True
        error = self._error or {}
        said = str_field(error.get("message"))
        reason = failure_reason(error, self._failed_call) if self._error is not None else ""
        output = self._streaming or self._last_text
        if self._exit is None:
            early = ended_early(
                "copilot", "its result", exit_code, stderr_tail, output, self.session_id
            )
            error_text = f"{said}; {early.error}" if said else early.error
            return replace(
                early, error=error_text, usage=self.usage.report(), failure_reason=reason
            )
        failed = self._exit != 0 or self._error is not None
        if failed:
            how = f"copilot exited with code {self._exit}" if self._exit else ""
            said = "; ".join(part for part in (said, how) if part)
            tail = stderr_tail.strip()
            said = f"{said}; stderr: {tail}" if tail else said
        return RunResult(
            RunStatus.FAILED if failed else RunStatus.COMPLETED,
            output=output,
            error=said if failed else "",
            session_id=self.session_id,
            usage=self.usage.report(),
            exit_code=exit_code,
            failure_reason=reason,
        )

    def _session_start(self, data: Mapping[str, Any]) -> list[Message]:
        self.model = str_field(data.get("selectedModel")) or self.model
        found = str_field(data.get("sessionId"))
        if not found:
            return []
        self.session_id = found
        said = Message(MessageType.STATUS, content=f"Copilot session {found}", session_id=found)
        if self.resuming and found != self.resuming:
            return [Message(MessageType.STATUS, content=fresh_session_notice(self.resuming)), said]
        return [said]

    def _message(self, data: Mapping[str, Any]) -> list[Message]:
        # This event is the turn's boundary: the deltas that streamed it are superseded.
        self._streaming = ""
        self.model = str_field(data.get("model")) or self.model
        self.usage.add_message(self.model, int_field(data.get("outputTokens")))
        messages: list[Message] = []
        if thought := str_field(data.get("reasoningText")):
            messages.append(Message(MessageType.THINKING, content=thought))
        if text := str_field(data.get("content")):
            self._last_text = text
            messages.append(Message(MessageType.TEXT, content=text))
        for request in data.get("toolRequests") or []:
            if isinstance(request, dict) and (call := str_field(request.get("toolCallId"))):
                self._requested[call] = request
        return messages

    def _turn_start(self, data: Mapping[str, Any]) -> list[Message]:
        # A sign of life before the model's first word: the first-output budget counts it.
        turn = str_field(data.get("turnId"))
        return [Message(MessageType.STATUS, content=f"copilot turn {turn} started")]

    def _reasoning(self, data: Mapping[str, Any]) -> list[Message]:
        text = str_field(data.get("content"))
        return [Message(MessageType.THINKING, content=text)] if text else []

    def _tool_start(self, data: Mapping[str, Any]) -> list[Message]:
        call = str_field(data.get("toolCallId"))
        if call in self._started:
            return []
        self._started.add(call)
        return [_tool_use(call, str_field(data.get("toolName")), data.get("arguments"))]

    def _tool_complete(self, data: Mapping[str, Any]) -> list[Message]:
        call = str_field(data.get("toolCallId"))
        self.model = str_field(data.get("model")) or self.model
        before: list[Message] = []
        if call not in self._started:
            # A CLI that announced the call only in its message: in flight no longer.
            request = self._requested.get(call, {})
            name = str_field(request.get("name"))
            before = [_tool_use(call, name, request.get("arguments"))]
        self._started.discard(call)
        self._requested.pop(call, None)
        ok = data.get("success") is True
        result, error = data.get("result"), data.get("error")
        output = str_field(result.get("content")) if isinstance(result, dict) else ""
        if not ok and isinstance(error, dict) and str_field(error.get("message")):
            output = "Error: " + str_field(error.get("message"))
        done = Message(MessageType.TOOL_RESULT, call_id=call, output=output, is_error=not ok)
        return [*before, done]

    def _call_usage(self, data: Mapping[str, Any]) -> list[Message]:
        # The CLI writes "unknown" when it cannot name the model: the session's stands in.
        named = str_field(data.get("model"))
        if named and named != "unknown":
            self.model = named
        self.usage.add_call(self.model, data)
        return []

    def _shutdown(self, data: Mapping[str, Any]) -> list[Message]:
        metrics = data.get("modelMetrics")
        if isinstance(metrics, dict):
            self.usage.add_totals(metrics, self.model)
        return []

    def _session_error(self, data: Mapping[str, Any]) -> list[Message]:
        self._error = dict(data)
        text = str_field(data.get("message")) or "copilot reported an error"
        return [Message(MessageType.ERROR, content=text, is_error=True)]

    def _call_failure(self, data: Mapping[str, Any]) -> list[Message]:
        # Kept for the reason of a `session.error` to come; the CLI retries it first.
        self._failed_call = dict(data)
        return []

    def _retry(self, data: Mapping[str, Any]) -> list[Message]:
        why = str_field(data.get("reason")) or "an API error"
        return [Message(MessageType.STATUS, content=f"copilot retries the model call ({why})")]

    def _warning(self, data: Mapping[str, Any]) -> list[Message]:
        return [Message(MessageType.LOG, content=str_field(data.get("message")))]


def _tool_use(call: str, name: str, arguments: Any) -> Message:
    given = arguments if isinstance(arguments, dict) else {}
    return Message(MessageType.TOOL_USE, tool=name or "tool", call_id=call, input=given)


_HANDLERS = {
    "session.start": CopilotEventParser._session_start,
    "assistant.turn_start": CopilotEventParser._turn_start,
    "assistant.message": CopilotEventParser._message,
    "assistant.reasoning": CopilotEventParser._reasoning,
    "tool.execution_start": CopilotEventParser._tool_start,
    "tool.execution_complete": CopilotEventParser._tool_complete,
    "assistant.usage": CopilotEventParser._call_usage,
    "session.shutdown": CopilotEventParser._shutdown,
    "session.error": CopilotEventParser._session_error,
    "session.warning": CopilotEventParser._warning,
    "model.call_failure": CopilotEventParser._call_failure,
    "assistant.turn_retry": CopilotEventParser._retry,
}
