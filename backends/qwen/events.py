"""Qwen Code's `--output-format stream-json` events, line by line, as the daemon's messages.

The format is Claude Code's, as Qwen Code prints it (0.24.4):

    system/init                 status (carries the session id and the model)
    system/retry                status: a provider call failed and is retried after a delay
                                (a 429: up to 10 times, a minute apart, the first after
                                minutes of silent retries of its own)
    system/<other>              log
    assistant                   one message per content block: text, thinking, tool_use —
                                printed when the model's message is complete, before the tool
                                runs, so a tool is in flight from here; a text that is a
                                provider's error (`[API Error: …]`) is an error
    user                        tool_result per tool_result block (call id, is_error)
    stream_event                nothing (goal state; partial deltas are not asked for)
    result                      the run's end: `is_error` or a subtype other than `success`
                                fails it, with `error.message` (or `result`) as the error
    error                       error, and the run's failure
    anything else               log naming the type (`unknown`; a run of only such lines fails)

Usage is summed over the assistant messages, each API message once, per model. The `result`
line's total is not used: it counts the whole session (earlier runs of a resumed one too) and
names no model. What it adds — Qwen Code's managed-memory subagent, which calls the model after
every turn and prints nothing — goes unreported. Qwen's `input_tokens` is the API's prompt
count, cached tokens included; the daemon reports input without them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.claude.blocks import tool_results, tool_use
from backends.json_lines import JsonLinesParser, ended_early, int_field, str_field
from backends.qwen.failure import PREFIX, failure_reason
from backends.resume import fresh_session_notice

# What `qwen --resume ID` prints (stderr) when it has no such session for this directory.
SESSION_MISSING = ("No saved session found", "No session found", "Session not found")
PROVIDER = "qwen"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""
_COUNTS = ("input_tokens", "output_tokens", "cache_read_input_tokens")


class QwenStreamParser(JsonLinesParser):
    """A `LineParser` for one `qwen --output-format stream-json` process."""

    cli = "qwen"
    missing_session_markers = SESSION_MISSING

    def __init__(
        self, model: str = "", resuming: str = "", version: str = "", tested_max: str = ""
    ) -> None:
        super().__init__(resuming, version, tested_max, model=model)
        self._last_text = ""
        self._result: dict[str, Any] | None = None
        self._error = ""
        self._spent: dict[str, dict[str, dict[str, int]]] = {}
        """Usage of each assistant API message: model → message id → counts."""

    def event(self, event: dict[str, Any]) -> ParseStep:
        """One stream-json event as messages."""
        kind = str_field(event.get("type"))
        if kind == "system":
            return ParseStep(messages=[self._system(event)])
        if kind == "assistant":
            return ParseStep(messages=self._assistant(event.get("message")))
        if kind == "user":
            return ParseStep(messages=tool_results(event))
        if kind == "stream_event":
            return ParseStep()
        if kind == "result":
            return ParseStep(messages=self._on_result(event))
        if kind == "error":
            self._error = self._error or _error_text(event)
            return ParseStep(
                messages=[Message(MessageType.ERROR, content=self._error, is_error=True)]
            )
        return self.unknown(f"qwen event: {kind}")

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: the `result` line decides; without one the run failed."""
        if self.resuming and not self.session_id and self.says_session_missing(stderr_tail):
            self.session_not_found = True
        result = self._result
        if result is None:
            early = ended_early(
                "qwen", "its final result", exit_code, stderr_tail, self._last_text, self.session_id
            )
            if self._error:
                early = replace(
                    early, error=self._error, failure_reason=failure_reason(self._error)
                )
            return replace(early, usage=self.usage())
        if _failed(result):
            error = _error_text(result)
            return RunResult(
                RunStatus.FAILED,
                output=self._last_text,
                error=error,
                session_id=self.session_id,
                usage=self.usage(),
                exit_code=exit_code,
                failure_reason=failure_reason(error),
            )
        return RunResult(
            RunStatus.COMPLETED,
            output=str_field(result.get("result")) or self._last_text,
            session_id=self.session_id,
            usage=self.usage(),
            exit_code=exit_code,
        )

    def usage(self) -> tuple[Usage, ...]:
        """The run's usage so far, per model (a model that counted nothing is left out)."""
        totals = []
        for model, messages in sorted(self._spent.items()):
            sums = {name: sum(m[name] for m in messages.values()) for name in _COUNTS}
            cached = sums["cache_read_input_tokens"]
            entry = Usage(
                PROVIDER,
                model,
                input_tokens=max(0, sums["input_tokens"] - cached),
                output_tokens=sums["output_tokens"],
                cache_read_tokens=cached,
            )
            if any(sums.values()):
                totals.append(entry)
        return tuple(totals)

    def _system(self, event: Mapping[str, Any]) -> Message:
        subtype = str_field(event.get("subtype"))
        if subtype == "retry":
            data = event.get("data")
            data = data if isinstance(data, dict) else {}
            attempt, most = int_field(data.get("attempt")), int_field(data.get("maxRetries"))
            wait = int_field(data.get("delayMs")) / 1000
            said = "qwen retry" + (f" {attempt}/{most}" if attempt else "")
            return Message(MessageType.STATUS, content=said + (f" in {wait:g}s" if wait else ""))
        if subtype != "init":
            return Message(MessageType.LOG, content=f"qwen {subtype}".strip())
        self.session_id = str_field(event.get("session_id"))
        self.model = str_field(event.get("model")) or self.model
        if self.resuming and self.session_id != self.resuming:
            # Qwen started another session than the one asked for: the first is gone.
            return Message(
                MessageType.STATUS,
                content=fresh_session_notice(self.resuming),
                session_id=self.session_id,
            )
        version = str_field(event.get("qwen_code_version"))
        words = ("Qwen Code", version, "session", self.session_id, f"({self.model})")
        content = " ".join(w for w in words if w and w != "()")
        return Message(MessageType.STATUS, content=content, session_id=self.session_id)

    def _assistant(self, message: Any) -> list[Message]:
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return []
        self._count(message)
        out: list[Message] = []
        for block in message["content"]:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text" and str_field(block.get("text")).startswith(PREFIX):
                # A provider's error, told as the model's message.
                said = str_field(block.get("text"))
                out.append(Message(MessageType.ERROR, content=said, is_error=True))
            elif kind == "text" and str_field(block.get("text")):
                self._last_text = str_field(block.get("text"))
                out.append(Message(MessageType.TEXT, content=self._last_text))
            elif kind == "thinking" and str_field(block.get("thinking")):
                out.append(Message(MessageType.THINKING, content=str_field(block.get("thinking"))))
            elif kind == "tool_use":
                out.append(tool_use(block))
            elif isinstance(kind, str) and kind not in ("text", "thinking"):
                out.append(Message(MessageType.LOG, content=f"qwen content block: {kind}"))
        return out

    def _count(self, message: Mapping[str, Any]) -> None:
        model = str_field(message.get("model")) or self.model or "unknown"
        raw = message.get("usage")
        if not isinstance(raw, dict):
            return
        key = str_field(message.get("id")) or f"line-{sum(map(len, self._spent.values()))}"
        self._spent.setdefault(model, {})[key] = {k: int_field(raw.get(k)) for k in _COUNTS}

    def _on_result(self, event: dict[str, Any]) -> list[Message]:
        if self._result is not None:
            return [Message(MessageType.LOG, content="qwen sent another result")]
        self._result = event
        failed = _failed(event)
        text = _error_text(event) if failed else str_field(event.get("result"))
        return [
            Message(
                MessageType.RESULT,
                content=text,
                output=self._last_text if failed else text,
                session_id=self.session_id,
                is_error=failed,
                usage=self.usage(),
            )
        ]


def _failed(result: Mapping[str, Any]) -> bool:
    return result.get("is_error") is True or result.get("subtype") not in (None, "success")


def _error_text(event: Mapping[str, Any]) -> str:
    """What a failed `result` or an `error` event says: its error's message, else its text."""
    error = event.get("error")
    if isinstance(error, dict) and str_field(error.get("message")):
        return str_field(error.get("message"))
    if isinstance(error, str) and error:
        return error
    said = str_field(event.get("result")) or str_field(event.get("message"))
    if said:
        return said
    return f"qwen reported {str_field(event.get('subtype')) or 'an error'}" + (
        f": {json.dumps(error)}" if error else ""
    )
