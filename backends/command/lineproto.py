"""The `command` line protocol: one message per stdout line, plain text welcome.

The agent gets the prompt on stdin, which is then closed, and prints one JSON object a line:

    {"type": "text", "content": "working on it"}
    {"type": "tool_use", "tool": "Bash", "call_id": "c1", "input": {"command": "make"}}
    {"type": "tool_result", "call_id": "c1", "output": "ok", "is_error": false}
    {"type": "result", "output": "done", "session_id": "s1", "usage": {"input_tokens": 9}}

`type` is a `MessageType` (text, thinking, tool_use, tool_result, status, error, log, result);
`content`, `tool`, `call_id`, `output` and `session_id` are strings, `input` an object,
`is_error` a boolean. A `tool_result` needs no `tool`: the transcript names it after the call
its `call_id` ends (without ids, the oldest call without one). `usage` is one object or a list
of them: `provider`, `model` and token counts (`input_tokens`, `output_tokens`,
`cache_read_tokens`, `cache_write_tokens`, or the Anthropic API's `cache_read_input_tokens` and
`cache_creation_input_tokens`). A `result` with an `error` fails the run. Exit 0 completes the
run with the result's output (without one, the text printed); any other exit fails it, named
by the result's error, else the last `error` message, else the last line on stderr.

A line that is a JSON object with a known `type` becomes that message; any other line — not
JSON, or JSON without a known type — is a `text` message carrying the line, so a plain script
works unchanged. A known type whose fields do not fit the message model (say `"content": 5`) is
also kept as text, and counted as invalid, so nothing the agent said is lost.
"""

from __future__ import annotations

import json
import logging
import signal
from collections import deque
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from backends.base import Message, MessageType, ParseStep, RunResult, RunSpec, RunStatus, Usage
from backends.json_lines import json_object
from backends.process import ProcessRun, ProcessSpec, run_process

log = logging.getLogger(__name__)

TEXT_OUTPUT_LIMIT = 1024 * 1024
"""Joined text output kept for the result (the last bytes; earlier text is cut)."""

_KNOWN = {t.value: t for t in MessageType}
# Enum members bound once: attribute access on an Enum class is slow on the hot path.
_RESULT, _TEXT, _ERROR = MessageType.RESULT, MessageType.TEXT, MessageType.ERROR
_STRING_FIELDS = ("content", "tool", "call_id", "output", "session_id")
_USAGE_FIELDS = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cache_read_tokens",
    "cache_write_tokens": "cache_write_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
}


class LineProtocolParser:
    """Parses the `command` line protocol and builds the run's result from it."""

    def __init__(self, provider: str = "command") -> None:
        self._provider = provider
        self._texts: deque[str] = deque()
        self._text_bytes = 0
        self._text_cut = False
        self._result: Message | None = None
        self._last_error = ""
        self._session_id = ""

    def feed(self, line: str) -> ParseStep:
        """Turn one stdout line into a message (blank lines only shape the joined output)."""
        if not line.strip():
            self._remember_text(line)
            return ParseStep()
        event = json_object(line)
        if event is None or event.get("type") not in _KNOWN:
            return self._text(line)
        try:
            message = self._message(event)
        except ValueError as exc:
            log.warning("line protocol: %s; kept as text", exc)
            step = self._text(line)
            step.invalid = True
            return step
        if message.session_id:
            self._session_id = message.session_id
        if message.type is _RESULT:
            self._result = message
        elif message.type is _TEXT:
            self._remember_text(message.content)
        elif message.type is _ERROR and message.content.strip():
            self._last_error = message.content.strip()
        return ParseStep(messages=[message])

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """Exit 0 → completed with the result's output (else the text); otherwise failed."""
        result = self._result
        output = result.output if result is not None and result.output else self._joined_text()
        error = result.content if result is not None and result.is_error else ""
        usage = result.usage if result is not None else ()
        if exit_code == 0 and not error:
            return RunResult(
                RunStatus.COMPLETED, output, "", self._session_id, usage, exit_code=exit_code
            )
        # Why, in the agent's own words: its result's error, else the last error it printed
        # as an event, else its last line on stderr (a traceback ends with the exception).
        detail = error or self._last_error or _last_line(stderr_tail) or "no error output"
        return RunResult(
            RunStatus.FAILED,
            output,
            f"{describe_exit(exit_code)}: {detail}",
            self._session_id,
            usage,
            exit_code=exit_code,
        )

    def _text(self, line: str) -> ParseStep:
        self._remember_text(line)
        return ParseStep(messages=[Message(MessageType.TEXT, content=line)])

    def _message(self, event: Mapping[str, Any]) -> Message:
        kind = _KNOWN[event["type"]]
        fields: dict[str, Any] = {}
        for name in _STRING_FIELDS:
            value = event.get(name)
            if value is not None:
                if value.__class__ is not str and not isinstance(value, str):
                    raise ValueError(f"{kind.value}.{name} is not a string")
                fields[name] = value
        tool_input = event.get("input")
        if tool_input is not None:
            if not isinstance(tool_input, dict):
                raise ValueError(f"{kind.value}.input is not an object")
            fields["input"] = tool_input
        if event.get("is_error") is True:
            fields["is_error"] = True
        if kind is _RESULT:
            error = event.get("error")
            if error:
                # The error text rides in `content`; `output` stays the agent's answer.
                fields["content"] = error if isinstance(error, str) else json.dumps(error)
                fields["is_error"] = True
        raw_usage = event.get("usage")
        if raw_usage is not None:
            fields["usage"] = self._usage(raw_usage)
        return Message(kind, **fields)

    def _usage(self, raw: object) -> tuple[Usage, ...]:
        entries = [raw] if isinstance(raw, dict) else raw if isinstance(raw, list) else []
        usage: list[Usage] = []
        for entry in entries:
            if not isinstance(entry, dict):
                log.warning("line protocol: usage entry is not an object; ignored")
                continue
            counts = {
                ours: value
                for theirs, ours in _USAGE_FIELDS.items()
                if isinstance(value := entry.get(theirs), int) and not isinstance(value, bool)
            }
            provider = entry.get("provider")
            model = entry.get("model")
            usage.append(
                Usage(
                    provider=provider if isinstance(provider, str) else self._provider,
                    model=model if isinstance(model, str) else "",
                    **counts,
                )
            )
        return tuple(usage)

    def _remember_text(self, text: str) -> None:
        # Bounded: a plain script may print for hours; the end of its output matters most.
        self._texts.append(text)
        self._text_bytes += len(text) + 1
        while self._text_bytes > TEXT_OUTPUT_LIMIT and len(self._texts) > 1:
            self._text_bytes -= len(self._texts.popleft()) + 1
            self._text_cut = True

    def _joined_text(self) -> str:
        joined = "\n".join(self._texts).strip("\n")
        if len(joined) > TEXT_OUTPUT_LIMIT:
            joined, self._text_cut = joined[-TEXT_OUTPUT_LIMIT:], True
        return f"[earlier output cut]\n{joined}" if self._text_cut else joined


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def describe_exit(exit_code: int | None) -> str:
    """Name how a process ended: `exit code 3`, `killed by SIGKILL`, `did not exit`."""
    if exit_code is None:
        return "did not exit"
    if exit_code < 0:
        try:
            return f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"killed by signal {-exit_code}"
    return f"exit code {exit_code}"


def run_line_agent(
    argv: Sequence[str], spec: RunSpec, provider: str
) -> AbstractAsyncContextManager[ProcessRun]:
    """Start an agent speaking this protocol: the prompt on stdin, then stdin closed."""
    process_spec = ProcessSpec.for_run(spec, argv, spec.env, spec.prompt.encode())
    return run_process(process_spec, LineProtocolParser(provider=provider))
