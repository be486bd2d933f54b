"""Codex's `exec --json` events, line by line, as the daemon's message model.

    thread.started              status (carries the thread id, the session to resume)
    turn.started                nothing
    item.started                tool_use for command_execution, file_change, mcp_tool_call,
                                web_search (the item id is the call id)
    item.updated                log for a todo_list (the agent's plan); otherwise nothing
    item.completed              agent_message → text, reasoning → thinking, error → error,
                                a tool item → tool_result (a tool_use first if none was seen)
    turn.completed              result (the last agent message, usage)
    turn.failed                 result with is_error
    error                       error (stream retries, API errors)
    anything else               log naming the type (`unknown`; a run of only such lines fails)

Why a turn failed is read from its error sentence (`backends.codex.failure`).

Usage: `turn.completed` counts the whole thread, earlier runs of a resumed thread included, so
the backend hands in the thread's total from before this run (`baseline`) and only the
difference is reported. Input tokens are reported without the cached ones (as the Anthropic
API counts them): `input_tokens` = input − cached, `cache_read_tokens` = cached.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.codex.failure import failure_reason, limit_resets
from backends.codex.tool_items import EXEC_ITEMS
from backends.json_lines import JsonLinesParser, ended_early, int_field, str_field
from backends.resume import fresh_session_notice

# What `codex exec resume` prints (stderr) when the thread to resume does not exist.
SESSION_MISSING = ("no rollout found", "thread/resume failed")
PROVIDER = "codex"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""
_USAGE_KEYS = ("input_tokens", "cached_input_tokens", "cache_write_input_tokens", "output_tokens")


class CodexEventParser(JsonLinesParser):
    """A `LineParser` for one `codex exec --json` process."""

    cli = "codex"
    missing_session_markers = SESSION_MISSING

    def __init__(
        self,
        model: str,
        resuming: str = "",
        baseline: Mapping[str, int] | None = None,
        version: str = "",
        tested_max: str = "",
    ) -> None:
        super().__init__(resuming, version, tested_max, model=model)
        self.baseline = dict(baseline or {})
        self._last_text = ""
        self._started: set[str] = set()
        self._final: Message | None = None
        self._last_error = ""

    @property
    def thread_id(self) -> str:
        """The session, by Codex's name for it."""
        return self.session_id

    def event(self, event: dict[str, Any]) -> ParseStep:
        """One `exec --json` event as messages, or the turn's end."""
        kind = str_field(event.get("type"))
        if kind == "thread.started":
            return ParseStep(messages=self._thread_started(event))
        if kind == "turn.started":
            return ParseStep()
        if kind in ("item.started", "item.updated", "item.completed"):
            item = event.get("item")
            if not isinstance(item, dict):
                return ParseStep(invalid=True)
            return ParseStep(messages=self._item(kind.removeprefix("item."), item))
        if kind in ("turn.completed", "turn.failed"):
            return ParseStep(messages=[self._turn_end(event)])
        if kind == "error":
            self._last_error = str_field(event.get("message"))
            return ParseStep(messages=[_error(self._last_error)])
        return self.unknown(f"codex event: {kind}")

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: the turn's end decides; without one the run failed."""
        if self.resuming and not self.session_id and self.says_session_missing(stderr_tail):
            self.session_not_found = True
        final = self._final
        if final is None:
            early = ended_early(
                "codex",
                "the turn completed",
                exit_code,
                stderr_tail,
                self._last_text,
                self.session_id,
            )
            return replace(early, failure_reason=failure_reason(self._last_error))
        said = final.content if final.is_error else ""
        return RunResult(
            RunStatus.FAILED if final.is_error else RunStatus.COMPLETED,
            output=final.output,
            error=said,
            session_id=self.session_id,
            usage=final.usage,
            exit_code=exit_code,
            failure_reason=failure_reason(said or self._last_error) if said else "",
            limit_resets=limit_resets(said),
        )

    def _thread_started(self, event: Mapping[str, Any]) -> list[Message]:
        self.session_id = str_field(event.get("thread_id"))
        messages = [
            Message(
                MessageType.STATUS,
                content=f"Codex thread {self.session_id}",
                session_id=self.session_id,
            )
        ]
        if self.resuming and self.session_id != self.resuming:
            # Given a name it cannot find, the CLI quietly starts a new thread.
            messages.insert(
                0,
                Message(MessageType.STATUS, content=fresh_session_notice(self.resuming)),
            )
        return messages

    def _item(self, phase: str, item: Mapping[str, Any]) -> list[Message]:
        kind = str_field(item.get("type"))
        if kind in EXEC_ITEMS:
            return EXEC_ITEMS.messages(phase, kind, item, self._started)
        if phase == "updated":
            if kind == "todo_list":
                return [Message(MessageType.LOG, content=_plan(item))]
            return []
        if phase != "completed":
            return []
        if kind == "agent_message":
            self._last_text = str_field(item.get("text"))
            return [Message(MessageType.TEXT, content=self._last_text)]
        if kind == "reasoning":
            return [Message(MessageType.THINKING, content=str_field(item.get("text")))]
        if kind == "error":
            return [_error(str_field(item.get("message")))]
        if kind == "todo_list":
            return [Message(MessageType.LOG, content=_plan(item))]
        return [Message(MessageType.LOG, content=f"codex item: {kind}")]

    def _turn_end(self, event: Mapping[str, Any]) -> Message:
        if self._final is not None:
            return Message(MessageType.LOG, content="codex ended another turn")
        if event.get("type") == "turn.failed":
            error = event.get("error")
            text = str_field(error.get("message")) if isinstance(error, dict) else ""
            self._final = Message(
                MessageType.RESULT,
                content=text or "codex reported a failed turn",
                output=self._last_text,
                session_id=self.session_id,
                is_error=True,
            )
        else:
            self._final = Message(
                MessageType.RESULT,
                content=self._last_text,
                output=self._last_text,
                session_id=self.session_id,
                usage=self._usage(event.get("usage")),
            )
        return self._final

    def _usage(self, raw: Any) -> tuple[Usage, ...]:
        if not isinstance(raw, dict):
            return ()
        spent = {k: max(0, int_field(raw.get(k)) - self.baseline.get(k, 0)) for k in _USAGE_KEYS}
        if not any(spent.values()):
            return ()  # as Multica's daemon: a model that counted nothing is no entry
        cached = spent["cached_input_tokens"]
        return (
            Usage(
                provider=PROVIDER,
                model=self.model,
                input_tokens=max(0, spent["input_tokens"] - cached),
                output_tokens=spent["output_tokens"],
                cache_read_tokens=cached,
                cache_write_tokens=spent["cache_write_input_tokens"],
            ),
        )


def thread_totals(token_count: Mapping[str, Any]) -> dict[str, int]:
    """A thread's usage totals from a rollout `token_count` payload's `total_token_usage`."""
    return {k: int_field(token_count.get(k)) for k in _USAGE_KEYS}


def _plan(item: Mapping[str, Any]) -> str:
    steps = item.get("items") or []
    lines = [
        ("[x] " if s.get("completed") else "[ ] ") + str_field(s.get("text"))
        for s in steps
        if isinstance(s, dict)
    ]
    return "plan:\n" + "\n".join(lines)


def _error(text: str) -> Message:
    return Message(MessageType.ERROR, content=text or "codex reported an error", is_error=True)
