"""Claude Code's stream-json output, line by line, as the daemon's message model.

One parser serves one CLI process. Every line type the CLI prints in `-p --output-format
stream-json --verbose` mode maps to zero or more messages:

    system/init                 status (carries the session id)
    system/api_retry            status ("API error 529 (overloaded); retry 1 of 2 in 564 ms")
    system/<other>              log (task_started, task_notification, permission_denied, ...)
    assistant                   one message per content block: text, thinking, tool_use
                                (an API error the CLI reports as an assistant message: error)
    user                        tool_result per tool_result block (call id, is_error)
    tool_progress               log marked `heartbeat`: the tool still runs (every 30 s); it
                                never counts as activity, or a wedged tool could never time out
    stream_event                nothing: partial deltas (--include-partial-messages) would flood
                                the transcript, and the complete `assistant` line follows
    control_request             nothing; answered on stdin with an allow response
    result                      result (final text, session id, usage, is_error); closes stdin
    anything else               log naming the type (`unknown`): activity once the CLI has
                                printed an event the parser knows; a run of only such lines fails

A `result` with `is_error: true` fails the run even when its subtype says `success` (that is
how the CLI reports an API error after its retries), and so does `terminal_reason:
prompt_too_long` (the context is full; the CLI has been seen to call that a success). Why it
failed is read from the structured fields (`backends.claude.failure`). A process that ends
without a `result` line fails with the stderr tail in the error.

Usage is the `result` line's per-model count; until it arrives (and when it counts nothing)
it is the sum of the assistant lines' usage, each API message counted once, so a run that is
stopped or fails still reports what it spent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.claude.blocks import control_reply, progress, tool_result, tool_results, tool_use
from backends.claude.failure import failure_reason
from backends.json_lines import JsonLinesParser, ended_early, int_field, str_field

# What the CLI says when the session to resume does not exist (or is not a session id).
SESSION_MISSING = ("No conversation found", "requires a valid session ID")
PROVIDER = "claude"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""
_TEXT_LIMIT = 2000
_COUNTS = (
    ("input_tokens", "input_tokens"),
    ("output_tokens", "output_tokens"),
    ("cache_read_input_tokens", "cache_read_tokens"),
    ("cache_creation_input_tokens", "cache_write_tokens"),
)


class ClaudeStreamParser(JsonLinesParser):
    """A `LineParser` for one Claude Code process; `resuming` names the session it resumes."""

    cli = "claude"
    label = "Claude Code"
    provider = PROVIDER
    """The usage entries' `provider` (a fork of Claude Code reports under its own name)."""
    missing_session_markers = SESSION_MISSING

    def __init__(self, resuming: str = "", version: str = "", tested_max: str = "") -> None:
        super().__init__(resuming, version, tested_max)
        self._result: dict[str, Any] | None = None
        self._last_text = ""
        self._api_error: dict[str, Any] | None = None
        self._spent: dict[str, dict[str, dict[str, int]]] = {}
        """Usage of each assistant API message so far: model → message id → counts."""

    def event(self, event: dict[str, Any]) -> ParseStep:
        """One stream-json event as messages, replies on stdin, or the run's result."""
        kind = event.get("type")
        sid = str_field(event.get("session_id"))
        if sid and not self.session_not_found:
            self.session_id = sid
        if kind == "system":
            return ParseStep(messages=[self._system(event)])
        if kind == "assistant":
            return ParseStep(messages=self._assistant(event))
        if kind == "user":
            return ParseStep(messages=tool_results(event))
        if kind == "tool_progress":
            return ParseStep(messages=[progress(event)])
        if kind == "result":
            return self._on_result(event)
        if kind == "control_request":
            return ParseStep(replies=[control_reply(event)])
        if kind in ("stream_event", "control_response", "control_cancel_request", "keep_alive"):
            return ParseStep()
        return self.unknown(f"{self.cli} event: {kind}")

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: the `result` line decides; without one the run failed."""
        if self.resuming and self.says_session_missing(stderr_tail):
            self.session_not_found = True
        result = self._result
        if result is None:
            early = ended_early(
                self.cli,
                "its final result",
                exit_code,
                stderr_tail,
                self._last_text,
                self.session_id,
            )
            return replace(early, usage=self.usage())
        text = str_field(result.get("result"))
        usage = result_usage(result, self.provider) or self.usage()
        if _failed(result):
            return RunResult(
                RunStatus.FAILED,
                output=text,
                error=_result_error(result, stderr_tail),
                session_id=self.session_id,
                usage=usage,
                exit_code=exit_code,
                failure_reason=failure_reason(result, self._api_error),
            )
        # A result that says success completes the run even if the CLI then had to be
        # killed (it sent its answer but never exited).
        return RunResult(
            RunStatus.COMPLETED,
            output=text or self._last_text,
            session_id=self.session_id,
            usage=usage,
            exit_code=exit_code,
        )

    def _system(self, event: Mapping[str, Any]) -> Message:
        subtype = str_field(event.get("subtype"))
        if subtype == "init":
            version = str_field(event.get("claude_code_version"))
            model = str_field(event.get("model"))
            content = " ".join(
                p
                for p in (self.label, version, "session", self.session_id, f"({model})")
                if p and p != "()"
            )
            return Message(MessageType.STATUS, content=content, session_id=self.session_id)
        if subtype == "api_retry":
            status = event.get("error_status")
            return Message(
                MessageType.STATUS,
                content=(
                    f"API error {status} ({str_field(event.get('error'))}); retry "
                    f"{event.get('attempt')} of {event.get('max_retries')} in "
                    f"{event.get('retry_delay_ms')} ms"
                ),
            )
        detail = (
            str_field(event.get("message"))
            or str_field(event.get("description"))
            or str_field(event.get("summary"))
            or str_field(event.get("status"))
        )
        tool = str_field(event.get("tool_name"))
        content = " ".join(p for p in (self.cli, subtype, tool) if p)
        if detail:
            content += f": {detail}"
        return Message(
            MessageType.LOG,
            content=_cut(content),
            tool=tool,
            call_id=str_field(event.get("tool_use_id")),
        )

    def _assistant(self, event: Mapping[str, Any]) -> list[Message]:
        message = event.get("message")
        blocks = message.get("content") if isinstance(message, dict) else None
        if not isinstance(message, dict) or not isinstance(blocks, list):
            return []
        api_error = bool(event.get("error")) or bool(event.get("is_api_error_message"))
        if api_error:
            self._api_error = dict(event)
        counted = self._count(message)
        out: list[Message] = []
        for block in blocks:
            if not isinstance(block, dict):
                continue
            kind = block.get("type")
            if kind == "text":
                text = str_field(block.get("text"))
                if api_error:
                    out.append(Message(MessageType.ERROR, content=text, is_error=True))
                else:
                    self._last_text = text
                    out.append(Message(MessageType.TEXT, content=text))
            elif kind == "thinking":
                out.append(Message(MessageType.THINKING, content=str_field(block.get("thinking"))))
            elif kind == "redacted_thinking":
                out.append(Message(MessageType.THINKING, content="[redacted thinking]"))
            elif kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
                out.append(tool_use(block))
            elif isinstance(kind, str) and kind.endswith("tool_result"):
                # Server-side tools (web search) answer inside the assistant message itself.
                out.append(tool_result(block))
        if counted and out:
            out[0] = replace(out[0], usage=self.usage())
        return out

    def usage(self) -> tuple[Usage, ...]:
        """The run's usage so far, summed over its assistant messages, per model."""
        totals = []
        for model, messages in sorted(self._spent.items()):
            sums = {name: sum(m[name] for m in messages.values()) for _, name in _COUNTS}
            if any(sums.values()):
                totals.append(Usage(self.provider, model, **sums))
        return tuple(totals)

    def _count(self, message: Mapping[str, Any]) -> bool:
        """Note one API message's usage (repeated on each of its lines); True when it is new."""
        model, raw = str_field(message.get("model")), message.get("usage")
        if not model or model == "<synthetic>" or not isinstance(raw, dict):
            return False
        # A line without a message id is a message of its own.
        key = str_field(message.get("id")) or f"line-{sum(map(len, self._spent.values()))}"
        counts = {name: int_field(raw.get(field)) for field, name in _COUNTS}
        seen = self._spent.setdefault(model, {})
        new = seen.get(key) != counts
        seen[key] = counts
        return new

    def _on_result(self, event: dict[str, Any]) -> ParseStep:
        if self._result is not None:
            return ParseStep(
                messages=[Message(MessageType.LOG, content=f"{self.cli} sent another result")]
            )
        if self.resuming and _failed(event) and self.says_session_missing(_result_error(event, "")):
            # The session to resume is gone; the backend starts a fresh one instead, so
            # this is not the run's result.
            self.session_not_found = True
            self.session_id = ""
            return ParseStep(close_stdin=True)
        self._result = event
        text = str_field(event.get("result"))
        failed = _failed(event)
        return ParseStep(
            messages=[
                Message(
                    MessageType.RESULT,
                    content=_result_error(event, "") if failed else text,
                    output=text,
                    session_id=self.session_id,
                    is_error=failed,
                    usage=result_usage(event, self.provider) or self.usage(),
                )
            ],
            close_stdin=True,
        )


def result_usage(result: Mapping[str, Any], provider: str = PROVIDER) -> tuple[Usage, ...]:
    """Token usage per model of this process's run.

    On a resumed session `modelUsage` counts the whole session so far; the CLI's
    `model_usage_since_last_result` counts only this run, so it wins when present.
    """
    per_model = result.get("model_usage_since_last_result")
    if not isinstance(per_model, dict):
        per_model = result.get("modelUsage")
    if not isinstance(per_model, dict):
        return ()
    usage: list[Usage] = []
    for model, counts in sorted(per_model.items()):
        if not isinstance(counts, dict) or not model:
            continue
        entry = Usage(
            provider=provider,
            model=str(model),
            input_tokens=int_field(counts.get("inputTokens")),
            output_tokens=int_field(counts.get("outputTokens")),
            cache_read_tokens=int_field(counts.get("cacheReadInputTokens")),
            cache_write_tokens=int_field(counts.get("cacheCreationInputTokens")),
        )
        counted = (entry.input_tokens, entry.output_tokens)
        cached = (entry.cache_read_tokens, entry.cache_write_tokens)
        if any(counted + cached):  # as Multica's daemon: a model that counted nothing is left out
            usage.append(entry)
    return tuple(usage)


def _failed(result: Mapping[str, Any]) -> bool:
    return (
        bool(result.get("is_error"))
        or result.get("subtype") not in (None, "success")
        or result.get("terminal_reason") == "prompt_too_long"
    )


def _result_error(result: Mapping[str, Any], stderr_tail: str) -> str:
    errors = result.get("errors")
    if isinstance(errors, list) and errors:
        text = "; ".join(str_field(e) or json.dumps(e) for e in errors)
    else:
        text = str_field(result.get("result"))
    if not text:
        text = f"claude reported {str_field(result.get('subtype')) or 'an error'}"
        reason = str_field(result.get("terminal_reason"))
        if reason:
            text += f" ({reason})"
        if stderr_tail.strip():
            text += f"; stderr: {stderr_tail.strip()}"
    return text


def _cut(text: str) -> str:
    return text if len(text) <= _TEXT_LIMIT else text[:_TEXT_LIMIT] + "…"
