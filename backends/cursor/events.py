"""Cursor Agent's `--output-format stream-json` events, line by line, as the daemon's messages.

The shape is Claude Code's, with Cursor's own events beside it (seen in a recording of
cursor-agent 2026.07.20, the one Multica's tests keep):

    system/init                 status (carries the session id)
    system/error, error         error, and the run's failure if no result follows
    user                        nothing (the CLI echoing the prompt)
    connection, retry           nothing (transport frames)
    assistant                   one message per content block: text, thinking, tool_use
    thinking/delta              a `thinking chunk` log (activity); the block is joined
    thinking/completed          thinking: the joined block
    tool_call/started           tool_use: the tool is in flight from here — the tool is the
                                `<name>ToolCall` key of `tool_call`, its `args` the input
    tool_call/completed         tool_result (its `result` as text)
    tool_call/<other>           log (a subtype that is not a call's boundary never ends it)
    tool_use, tool_result       the older CLIs' flat tool events
    text                        text (an older CLI's `part.text`)
    step_finish                 nothing; its token counts are the usage when the result has
                                none
    result                      result: `is_error` or subtype `error` fails the run; closes
                                the run (current CLIs keep a worker alive after it, which the
                                exit grace then stops)
    anything else               log naming the type (`unknown`; a run of only such lines fails)

A call id is the first line of Cursor's two-line id. Usage is the result's (top-level
camelCase counts, or a `usage` object in either case), else the sum of the steps'. Cursor
cannot say that a session to resume is gone: a resumed run that fails fails as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from backends import api_errors
from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.json_lines import EndsWithUsage, JsonLinesParser, ended_early, int_field, str_field

PROVIDER = "cursor"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""
_QUIET = frozenset({"user", "connection", "retry"})
_PREFIX = re.compile(r"^(?i:stdout|stderr)\s*[:=]?\s*")
_SUFFIX = "ToolCall"
# Each count under the names Cursor has printed it by, newest first.
_COUNT_NAMES = {
    "input_tokens": ("input_tokens", "inputTokens"),
    "output_tokens": ("output_tokens", "outputTokens"),
    "cache_read_tokens": (
        "cached_input_tokens", "cachedInputTokens", "cacheReadTokens",
        "cache_read_input_tokens", "cacheReadInputTokens",
    ),
    "cache_write_tokens": (
        "cacheWriteTokens", "cache_creation_input_tokens", "cacheCreationInputTokens",
    ),
}  # fmt: skip


class CursorStreamParser(EndsWithUsage, JsonLinesParser):
    """A `LineParser` for one `cursor-agent -p --output-format stream-json` process."""

    cli = "cursor-agent"

    def __init__(
        self, model: str = "", resuming: str = "", version: str = "", tested_max: str = ""
    ) -> None:
        super().__init__(resuming, version, tested_max, model=model)
        self._texts: list[str] = []
        self._thinking: list[str] = []
        self._error = ""
        self._result: dict[str, Any] | None = None
        self._steps: dict[str, int] = dict.fromkeys(_COUNT_NAMES, 0)

    def feed(self, line: str) -> ParseStep:
        """One stdout line; a `stdout:`/`stderr:` prefix some builds print is dropped."""
        return super().feed(_PREFIX.sub("", line.strip(), count=1))

    def event(self, event: dict[str, Any]) -> ParseStep:
        """One stream-json event as messages."""
        kind, subtype = str_field(event.get("type")), str_field(event.get("subtype"))
        self.session_id = str_field(event.get("session_id")).strip() or self.session_id
        self.model = str_field(event.get("model")).strip() or self.model
        if kind in _QUIET:
            return ParseStep()
        if kind == "system":
            return ParseStep(messages=[self._system(subtype, event)])
        if kind == "assistant":
            return ParseStep(messages=self._assistant(event.get("message")))
        if kind == "thinking":
            return ParseStep(messages=self._thinking_event(subtype, event))
        if kind == "tool_call":
            return ParseStep(messages=[_tool_call(subtype, event)])
        if kind == "tool_use":
            raw = event.get("parameters")
            message = Message(
                MessageType.TOOL_USE,
                tool=str_field(event.get("tool_name")),
                call_id=str_field(event.get("tool_id")),
                input=raw if isinstance(raw, dict) else {},
            )
            return ParseStep(messages=[message])
        if kind == "tool_result":
            message = Message(
                MessageType.TOOL_RESULT,
                call_id=str_field(event.get("tool_id")),
                output=str_field(event.get("output")),
            )
            return ParseStep(messages=[message])
        if kind == "text":
            part = event.get("part")
            text = str_field(part.get("text")) if isinstance(part, dict) else ""
            return ParseStep(messages=self._text(text))
        if kind == "step_finish":
            self._step(event.get("part"))
            return ParseStep()
        if kind == "result":
            return ParseStep(messages=self._on_result(event))
        if kind == "error":
            self._error = _error_text(event) or self._error
            return ParseStep(
                messages=[Message(MessageType.ERROR, content=self._error, is_error=True)]
            )
        return self.unknown(f"cursor-agent event: {kind}")

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: the `result` line decides; without one the run failed."""
        result = self._result
        output = "".join(self._texts)
        if result is None:
            early = ended_early(
                self.cli, "its final result", exit_code, stderr_tail, "", self.session_id
            )
            if self._error:
                error = f"{self._error}; {early.error}"
                reason = api_errors.failure_reason(self._error)
                return self.result_of(
                    RunStatus.FAILED,
                    exit_code,
                    error=error,
                    reason=reason,
                )
            return self.result_of(
                RunStatus.FAILED,
                exit_code,
                error=early.error,
            )
        if _failed(result):
            error = _error_text(result) or "cursor-agent returned an error result without details"
            return self.result_of(
                RunStatus.FAILED,
                exit_code,
                error=error,
                reason=api_errors.failure_reason(error),
            )
        return self.result_of(
            RunStatus.COMPLETED,
            exit_code,
            output=str_field(result.get("result")) or output,
        )

    def usage(self) -> tuple[Usage, ...]:
        """The run's usage: the result's counts, else the sum of its steps'."""
        counts = _result_counts(self._result) if self._result is not None else None
        counts = counts or self._steps
        if not any(counts.values()):
            return ()
        return (Usage(PROVIDER, self.model or "cursor", **counts),)

    def _system(self, subtype: str, event: Mapping[str, Any]) -> Message:
        if subtype == "error":
            self._error = _error_text(event) or self._error
            return Message(MessageType.ERROR, content=self._error, is_error=True)
        if subtype != "init":
            return Message(MessageType.LOG, content=f"cursor-agent {subtype}".strip())
        words = ("Cursor Agent session", self.session_id, f"({self.model})")
        content = " ".join(w for w in words if w and w != "()")
        return Message(MessageType.STATUS, content=content, session_id=self.session_id)

    def _assistant(self, message: Any) -> list[Message]:
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            return []
        out: list[Message] = []
        for block in message["content"]:
            if not isinstance(block, dict):
                continue
            kind, text = block.get("type"), str_field(block.get("text"))
            if kind in ("text", "output_text"):
                out += self._text(text)
            elif kind == "thinking" and text:
                out.append(Message(MessageType.THINKING, content=text))
            elif kind == "tool_use":
                raw = block.get("input")
                out.append(
                    Message(
                        MessageType.TOOL_USE,
                        tool=str_field(block.get("name")),
                        call_id=str_field(block.get("id")),
                        input=raw if isinstance(raw, dict) else {},
                    )
                )
        return out

    def _text(self, text: str) -> list[Message]:
        if not text:
            return []
        self._texts.append(text)
        return [Message(MessageType.TEXT, content=text)]

    def _thinking_event(self, subtype: str, event: Mapping[str, Any]) -> list[Message]:
        if subtype == "delta":
            text = str_field(event.get("text"))
            if not text:
                return []
            self._thinking.append(text)
            return [Message(MessageType.LOG, content="thinking chunk")]
        if subtype == "completed":
            block, self._thinking = "".join(self._thinking).strip(), []
            return [Message(MessageType.THINKING, content=block)] if block else []
        return [Message(MessageType.LOG, content=f"cursor-agent thinking {subtype}".strip())]

    def _step(self, part: Any) -> None:
        tokens = part.get("tokens") if isinstance(part, dict) else None
        if not isinstance(tokens, dict):
            return
        cache = tokens.get("cache")
        self._steps["input_tokens"] += int_field(tokens.get("input"))
        self._steps["output_tokens"] += int_field(tokens.get("output"))
        if isinstance(cache, dict):
            self._steps["cache_read_tokens"] += int_field(cache.get("read"))

    def _on_result(self, event: dict[str, Any]) -> list[Message]:
        if self._result is not None:
            return [Message(MessageType.LOG, content="cursor-agent sent another result")]
        self._result = event
        failed = _failed(event)
        text = str_field(event.get("result"))
        content = _error_text(event) if failed else text or "".join(self._texts)
        return [
            Message(
                MessageType.RESULT,
                content=content,
                output="" if failed else content,
                session_id=self.session_id,
                is_error=failed,
                usage=self.usage(),
            )
        ]


def _tool_call(subtype: str, event: Mapping[str, Any]) -> Message:
    """A `tool_call` event: its boundaries as a tool's use and result, anything else a log."""
    envelope = event.get("tool_call")
    envelope = envelope if isinstance(envelope, dict) else {}
    call_id = call_id_of(str_field(event.get("call_id")) or str_field(envelope.get("toolCallId")))
    keys = sorted(k for k in envelope if len(k) > len(_SUFFIX) and k.endswith(_SUFFIX))
    payload = envelope.get(keys[0]) if keys else None
    payload = payload if isinstance(payload, dict) else {}
    tool = keys[0].removesuffix(_SUFFIX) if keys else ""
    if subtype == "started":
        args = payload.get("args")
        return Message(
            MessageType.TOOL_USE,
            tool=tool,
            call_id=call_id,
            input=args if isinstance(args, dict) else {},
        )
    if subtype == "completed":
        found = payload.get("result")
        output = "" if found is None else json.dumps(found, ensure_ascii=False)
        failed = isinstance(found, dict) and "success" not in found and bool(found)
        return Message(
            MessageType.TOOL_RESULT, tool=tool, call_id=call_id, output=output, is_error=failed
        )
    # Not a boundary: ending the call here would hand a long tool to the idle window.
    return Message(MessageType.LOG, content=f"cursor-agent tool_call {subtype}".strip(), tool=tool)


def call_id_of(raw: str) -> str:
    """Cursor's call id: the first of the two it packs into one string, one per line."""
    return raw.strip().split("\n", 1)[0].strip()


def _failed(result: Mapping[str, Any]) -> bool:
    return result.get("is_error") is True or result.get("subtype") == "error"


def _error_text(event: Mapping[str, Any]) -> str:
    for key in ("error", "detail", "result", "message"):
        said = event.get(key)
        if isinstance(said, dict):
            said = said.get("message")
        if isinstance(said, str) and said.strip():
            return said.strip()
    return ""


def _result_counts(result: Mapping[str, Any]) -> dict[str, int] | None:
    """The result's token counts: its top-level camelCase ones, else its `usage` object's."""
    top = {
        "input_tokens": int_field(result.get("inputTokens")),
        "output_tokens": int_field(result.get("outputTokens")),
        "cache_read_tokens": int_field(result.get("cacheReadTokens")),
        "cache_write_tokens": int_field(result.get("cacheWriteTokens")),
    }
    if any(top.values()):
        return top
    usage = result.get("usage")
    if not isinstance(usage, dict):
        return None
    return {
        name: next((int_field(usage.get(k)) for k in keys if int_field(usage.get(k))), 0)
        for name, keys in _COUNT_NAMES.items()
    }
