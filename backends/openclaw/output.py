"""What `openclaw agent --json` prints, as the daemon's messages and the run's result.

OpenClaw (2026.5.5 and later) prints its answer once, at the end: one JSON document, pretty
printed over many lines —

    {"payloads": [{"text": ...}, ...],
     "meta": {"durationMs": ..., "agentMeta": {"sessionId", "model", "usage": {...}}}}

— which becomes the run's text, session, model and usage. Some builds print line events
instead (`{"type": ...}` one a line, OpenCode's shape), read as they come:

    text                        text
    tool_use, tool_result       tool_use (`tool`, `callId`, `input`), tool_result (`text`)
    step_start                  status
    step_finish                 its `usage` is added to the run's
    error                       error, and the run's failure
    lifecycle                   a phase of error, failed or cancelled fails the run
    other types                 log naming the type

Lines that are neither are kept: the answer document is read once its closing brace arrives
(a line `}` at the margin), and the result goes out then — an OpenClaw that printed its
answer and did not exit is stopped by the exit grace, as Multica stops it. Plain text alone
is the answer of an OpenClaw that printed no JSON at all; nothing at all fails the run. While
OpenClaw works it prints nothing, so the idle window applies to the whole turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import from_json

from backends import api_errors
from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.json_lines import EndsWithUsage, ended_early, int_field, json_object, str_field

NO_OUTPUT = "openclaw returned no parseable output"
PROVIDER = "openclaw"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""
_COUNTS = {
    "input_tokens": ("input", "inputTokens", "input_tokens"),
    "output_tokens": ("output", "outputTokens", "output_tokens"),
    "cache_read_tokens": (
        "cacheRead", "cachedInputTokens", "cached_input_tokens", "cache_read",
        "cache_read_input_tokens",
    ),
    "cache_write_tokens": (
        "cacheWrite", "cacheCreationInputTokens", "cache_creation_input_tokens", "cache_write",
    ),
}  # fmt: skip
_MAX_KEPT = 4 * 1024 * 1024
"""The most text kept for the answer document (it is one JSON object, not a stream)."""


class OpenclawParser(EndsWithUsage):
    """A `LineParser` for one `openclaw agent --json` process."""

    def __init__(self, model: str = "", session_id: str = "") -> None:
        self.model = model
        self.session_id = session_id
        self.session_not_found = False
        self._kept: list[str] = []
        self._kept_size = 0
        self._texts: list[str] = []
        self._events = False
        self._answered = False
        self._error = ""
        self._usage = dict.fromkeys(_COUNTS, 0)

    def feed(self, line: str) -> ParseStep:
        """One stdout line: a line event, a line of the answer document, or plain text."""
        text = line.rstrip("\n")
        event = json_object(text)
        if event is not None and str_field(event.get("type")):
            self._events = True
            return ParseStep(messages=self._event(event))
        if self._kept_size < _MAX_KEPT:
            self._kept.append(text)
            self._kept_size += len(text)
        if text.startswith("}") and not self._answered:
            document = _document("\n".join(self._kept))
            if document is not None:
                return ParseStep(messages=self._answer(document))
        return ParseStep()

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result, from the answer or the events; a failed exit fails it."""
        if not self._answered and not self._events:
            document = _document("\n".join(self._kept))
            if document is not None:
                self._answer(document)
        output = "".join(self._texts)
        if self._error:
            return self._failed(self._error, exit_code)
        if not self._answered and not self._events:
            plain = "\n".join(self._kept).strip()
            if plain and exit_code == 0:
                return RunResult(RunStatus.COMPLETED, output=plain, exit_code=exit_code)
            early = ended_early("openclaw", "its answer", exit_code, stderr_tail)
            error = NO_OUTPUT if exit_code == 0 else early.error
            return self._failed(error, exit_code, api_errors.failure_reason(stderr_tail))
        if exit_code not in (0, None) and not self._answered:
            early = ended_early("openclaw", "its answer", exit_code, stderr_tail, output)
            return self._failed(early.error, exit_code)
        return self.result_of(
            RunStatus.COMPLETED,
            exit_code,
            output=output,
        )

    def usage(self) -> tuple[Usage, ...]:
        """The run's usage (one model: OpenClaw names the one its agent ran)."""
        if not any(self._usage.values()):
            return ()
        return (Usage(PROVIDER, self.model or "unknown", **self._usage),)

    def _failed(self, error: str, exit_code: int | None, reason: str = "") -> RunResult:
        return self.result_of(
            RunStatus.FAILED,
            exit_code,
            error=error,
            reason=reason or api_errors.failure_reason(error),
        )

    def _answer(self, document: Mapping[str, Any]) -> list[Message]:
        self._answered = True
        out: list[Message] = []
        payloads = document.get("payloads")
        for payload in payloads if isinstance(payloads, list) else []:
            text = str_field(payload.get("text")) if isinstance(payload, dict) else ""
            if text:
                self._texts.append(text)
                out.append(Message(MessageType.TEXT, content=text))
        meta = document.get("meta")
        agent = meta.get("agentMeta") if isinstance(meta, dict) else None
        if isinstance(agent, dict):
            self.session_id = str_field(agent.get("sessionId")) or self.session_id
            self.model = str_field(agent.get("model")).strip() or self.model
            if isinstance(agent.get("usage"), dict):
                self._usage = _counts(agent["usage"])
        output = "".join(self._texts)
        out.append(self.result_message(output))
        return out

    def _event(self, event: Mapping[str, Any]) -> list[Message]:
        kind = str_field(event.get("type"))
        self.session_id = str_field(event.get("sessionId")) or self.session_id
        text = str_field(event.get("text"))
        if kind == "text":
            if text:
                self._texts.append(text)
            return [Message(MessageType.TEXT, content=text)] if text else []
        if kind == "tool_use":
            raw = event.get("input")
            return [
                Message(
                    MessageType.TOOL_USE,
                    tool=str_field(event.get("tool")),
                    call_id=str_field(event.get("callId")),
                    input=raw if isinstance(raw, dict) else {},
                )
            ]
        if kind == "tool_result":
            return [
                Message(
                    MessageType.TOOL_RESULT,
                    tool=str_field(event.get("tool")),
                    call_id=str_field(event.get("callId")),
                    output=text,
                )
            ]
        if kind == "step_start":
            return [Message(MessageType.STATUS, content="openclaw step")]
        if kind == "step_finish":
            if isinstance(event.get("usage"), dict):
                step = _counts(event["usage"])
                self._usage = {k: self._usage[k] + step[k] for k in self._usage}
            return []
        failed = kind == "error" or (
            kind == "lifecycle" and event.get("phase") in ("error", "failed", "cancelled")
        )
        if failed:
            self._error = _error_text(event)
            return [Message(MessageType.ERROR, content=self._error, is_error=True)]
        return [Message(MessageType.LOG, content=f"openclaw {kind}")]


def _document(text: str) -> dict[str, Any] | None:
    """The answer document in `text` — the whole of it, or from its first line that opens an
    object — or None when there is none (yet)."""
    candidates = [text.strip()]
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.startswith("{")), None)
    if first:
        candidates.append("\n".join(lines[first:]).strip())
    for candidate in candidates:
        if not candidate.startswith("{"):
            continue
        try:
            found = from_json(candidate)
        except ValueError:
            continue
        meta = found.get("meta") if isinstance(found, dict) else None
        duration = meta.get("durationMs") if isinstance(meta, dict) else None
        if isinstance(found, dict) and (found.get("payloads") is not None or duration):
            return found
    return None


def _counts(raw: Mapping[str, Any]) -> dict[str, int]:
    return {
        name: next((int_field(raw.get(k)) for k in keys if int_field(raw.get(k))), 0)
        for name, keys in _COUNTS.items()
    }


def _error_text(event: Mapping[str, Any]) -> str:
    error = event.get("error")
    if isinstance(error, dict):
        data = error.get("data")
        for said in (
            data.get("message") if isinstance(data, dict) else None,
            error.get("message"),
            error.get("name"),
        ):
            if isinstance(said, str) and said:
                return said
    return (
        str_field(event.get("text")) or str_field(event.get("message")) or "unknown openclaw error"
    )
