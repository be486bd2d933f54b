"""DevEco Code's `run --format json` events, line by line, as the daemon's messages.

DevEco is built on OpenCode's engine and prints OpenCode's `run` events, one JSON object a
line (the shape Multica's daemon reads):

    step_start                  status
    text                        text (`part.text`)
    tool_use                    tool_use, and — once `part.state.status` is `completed` or
                                `error` — its tool_result (the output, or the error) at once
    step_finish                 nothing; `part.tokens` (input, output, cache read/write) is
                                added to the usage
    error                       error (`error.data.message`, else its name); fails the run
    anything else               log naming the type (`unknown`; a run of only such lines fails)

The run prints a tool when it has finished, so a tool is never in flight between two lines:
a long command is silence to the watchdog (as in Multica). The session id is each event's
`sessionID`. A run ends when the process exits: exit 0 with no error completes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from backends import api_errors
from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.json_lines import EndsWithUsage, JsonLinesParser, ended_early, int_field, str_field

PROVIDER = "deveco"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""


class DevecoEventParser(EndsWithUsage, JsonLinesParser):
    """A `LineParser` for one `deveco run --format json` process."""

    cli = "deveco"

    def __init__(
        self, model: str = "", resuming: str = "", version: str = "", tested_max: str = ""
    ) -> None:
        super().__init__(resuming, version, tested_max, model=model)
        self._texts: list[str] = []
        self._error = ""
        self._tokens = {"input_tokens": 0, "output_tokens": 0}
        self._tokens |= {"cache_read_tokens": 0, "cache_write_tokens": 0}

    def event(self, event: dict[str, Any]) -> ParseStep:
        """One event as messages."""
        kind = str_field(event.get("type"))
        self.session_id = str_field(event.get("sessionID")) or self.session_id
        part = event.get("part")
        part = part if isinstance(part, dict) else {}
        if kind == "step_start":
            return ParseStep(messages=[Message(MessageType.STATUS, content="deveco step")])
        if kind == "text":
            text = str_field(part.get("text"))
            if not text:
                return ParseStep()
            self._texts.append(text)
            return ParseStep(messages=[Message(MessageType.TEXT, content=text)])
        if kind == "tool_use":
            return ParseStep(messages=_tool(part))
        if kind == "step_finish":
            self._count(part.get("tokens"))
            return ParseStep()
        if kind == "error":
            self._error = _error_text(event.get("error"))
            return ParseStep(
                messages=[Message(MessageType.ERROR, content=self._error, is_error=True)]
            )
        return self.unknown(f"deveco event: {kind}")

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: an error event or a failed exit fails it."""
        output = "".join(self._texts)
        if self._error:
            return self.result_of(
                RunStatus.FAILED,
                exit_code,
                error=self._error,
                reason=api_errors.failure_reason(self._error),
            )
        if exit_code != 0:
            early = ended_early(
                self.cli, "it finished", exit_code, stderr_tail, "", self.session_id
            )
            return self.result_of(
                RunStatus.FAILED,
                exit_code,
                error=early.error,
                reason=api_errors.failure_reason(stderr_tail),
            )
        return self.result_of(
            RunStatus.COMPLETED,
            exit_code,
            output=output,
        )

    def usage(self) -> tuple[Usage, ...]:
        """The run's usage, summed over its steps."""
        if not any(self._tokens.values()):
            return ()
        return (Usage(PROVIDER, self.model or "unknown", **self._tokens),)

    def _count(self, tokens: Any) -> None:
        if not isinstance(tokens, dict):
            return
        self._tokens["input_tokens"] += int_field(tokens.get("input"))
        self._tokens["output_tokens"] += int_field(tokens.get("output"))
        cache = tokens.get("cache")
        if isinstance(cache, dict):
            self._tokens["cache_read_tokens"] += int_field(cache.get("read"))
            self._tokens["cache_write_tokens"] += int_field(cache.get("write"))


def _tool(part: Mapping[str, Any]) -> list[Message]:
    """A `tool_use` part: the call, and its result once its state says it ended."""
    state = part.get("state")
    state = state if isinstance(state, dict) else {}
    raw = state.get("input")
    tool, call_id = str_field(part.get("tool")), str_field(part.get("callID"))
    out = [
        Message(
            MessageType.TOOL_USE,
            tool=tool,
            call_id=call_id,
            input=raw if isinstance(raw, dict) else {},
        )
    ]
    status = state.get("status")
    if status in ("completed", "error"):
        found = state.get("output")
        text = found if isinstance(found, str) else ("" if found is None else json.dumps(found))
        if status == "error" and str_field(state.get("error")):
            text = str_field(state.get("error"))
        out.append(
            Message(
                MessageType.TOOL_RESULT,
                tool=tool,
                call_id=call_id,
                output=text,
                is_error=status == "error",
            )
        )
    return out


def _error_text(error: Any) -> str:
    """An error event's words: `data.message`, else its name."""
    if isinstance(error, dict):
        data = error.get("data")
        if isinstance(data, dict) and str_field(data.get("message")):
            return str_field(data.get("message"))
        if str_field(error.get("name")):
            return str_field(error.get("name"))
    return "unknown deveco error"
