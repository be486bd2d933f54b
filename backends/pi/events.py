"""Pi's `--mode json` events, line by line, as the daemon's message model.

    session                     status (carries the session id, the session to resume)
    agent_start, turn_start     nothing (a turn starts afresh: its text and its error)
    message_update              text_end → text, thinking_end → thinking (each block whole);
                                the deltas, and the tool call being streamed, nothing
    tool_execution_start        tool_use: the tool is in flight from here
    tool_execution_update       nothing (the tool's partial output; it is still in flight)
    tool_execution_end          tool_result (with isError)
    turn_end                    the assistant message's usage, counted per model; a turn that
                                ended on an error (stopReason "error") is remembered
    auto_retry_start            log (Pi retries a failed provider call by itself)
    auto_retry_end              a failed one is the run's failure (its finalError)
    compaction_start/_end       log
    agent_end                   result, when the turn succeeded (the daemon's exit grace
                                starts); after a failed turn nothing — Pi may retry it
    message_start/_end,         nothing
    queue_update
    error                       error
    anything else               log naming the type (`unknown`; a run of only such lines fails)

Pi exits 0 after a turn it could not complete: the run fails on the last turn's error unless
a later turn succeeded (a retry clears it at `turn_start`). The output is the text of the last
turn. Usage is per turn, not cumulative, so a resumed session needs no baseline; Pi's `input`
already leaves out the cached tokens (`cacheRead`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus, Usage
from backends.json_lines import EndsWithUsage, JsonLinesParser, ended_early, int_field, str_field
from backends.pi.failure import failure_reason
from backends.resume import fresh_session_notice

# What `pi --session ID` prints (stderr) when it cannot resume ID here: none anywhere, or one
# of another work directory (which it offers to fork, and refuses without a terminal).
SESSION_MISSING = ("No session found matching", "Session found in different project")
PROVIDER = "pi"
"""The usage entries' `provider`: the runtime's name, as Multica's daemon reports it."""
_QUIET = frozenset({"agent_start", "message_start", "message_end", "queue_update"})
_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite")


@dataclass(slots=True)
class _Turn:
    """What the turn running now said: its text blocks and the error it ended on."""

    texts: list[str] = field(default_factory=list)
    error: str = ""


class PiEventParser(EndsWithUsage, JsonLinesParser):
    """A `LineParser` for one `pi -p --mode json` process."""

    cli = "pi"
    provider = PROVIDER
    """The usage entries' `provider` (a fork of Pi reports under its own name)."""
    missing_session_markers = SESSION_MISSING

    def __init__(
        self, model: str = "", resuming: str = "", version: str = "", tested_max: str = ""
    ) -> None:
        super().__init__(resuming, version, tested_max, model=model)
        self.ended = False
        self._turn = _Turn()
        self._usage: dict[str, dict[str, int]] = {}
        self._failure = ""
        self._final = False

    def event(self, event: dict[str, Any]) -> ParseStep:
        """One `--mode json` event as messages."""
        kind = str_field(event.get("type"))
        if kind == "session":
            return ParseStep(messages=self._session(event))
        if kind in _QUIET:
            return ParseStep()
        if kind == "turn_start":
            self._turn = _Turn()
            return ParseStep()
        if kind == "message_update":
            return ParseStep(messages=self._update(event.get("assistantMessageEvent")))
        if kind.startswith("tool_execution_"):
            return ParseStep(messages=self._tool(kind.removeprefix("tool_execution_"), event))
        if kind == "turn_end":
            self._turn_end(event.get("message"))
            return ParseStep()
        if kind == "agent_end":
            return ParseStep(messages=self._agent_end())
        if kind.startswith("auto_retry_") or kind.startswith("compaction_"):
            return ParseStep(messages=self._retry_or_compaction(kind, event))
        if kind == "error":
            text = str_field(event.get("message")) or json.dumps(event.get("message"))
            self._failure = self._failure or text
            return ParseStep(messages=[Message(MessageType.ERROR, content=text, is_error=True)])
        return self.unknown(f"pi event: {kind}")

    def result(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: an `agent_end` with no error left standing completes it."""
        if self.resuming and not self.session_id and self.says_session_missing(stderr_tail):
            self.session_not_found = True
        output = "\n\n".join(self._turn.texts)
        failure = self._failure or self._turn.error
        if not self.ended or (exit_code not in (0, None) and not failure):
            early = ended_early(
                self.cli, "the agent ended", exit_code, stderr_tail, output, self.session_id
            )
            # Pi's own refusals (no key, an unknown model) are said on stderr, before a turn.
            reason = failure_reason(failure or stderr_tail)
            return replace(early, usage=self.usage(), failure_reason=reason)
        return RunResult(
            RunStatus.FAILED if failure else RunStatus.COMPLETED,
            output=output,
            error=failure,
            session_id=self.session_id,
            usage=self.usage(),
            exit_code=exit_code,
            failure_reason=failure_reason(failure) if failure else "",
        )

    def usage(self) -> tuple[Usage, ...]:
        """The tokens each model spent in this run (a model that counted nothing is left out)."""
        return tuple(
            Usage(
                provider=self.provider,
                model=model,
                input_tokens=spent["input"],
                output_tokens=spent["output"],
                cache_read_tokens=spent["cacheRead"],
                cache_write_tokens=spent["cacheWrite"],
            )
            for model, spent in self._usage.items()
            if any(spent.values())
        )

    def _agent_end(self) -> list[Message]:
        self.ended = True
        if self._turn.error or self._failure or self._final:
            # A failed turn: Pi may retry it (`auto_retry_start` follows) or exit.
            return []
        self._final = True
        output = "\n\n".join(self._turn.texts)
        return [self.result_message(output)]

    def _session(self, event: Mapping[str, Any]) -> list[Message]:
        self.session_id = str_field(event.get("id"))
        said = Message(
            MessageType.STATUS, content=f"Pi session {self.session_id}", session_id=self.session_id
        )
        if self.resuming and self.session_id != self.resuming:
            # `--session` takes an id prefix; another session than the one asked for is new.
            return [Message(MessageType.STATUS, content=fresh_session_notice(self.resuming)), said]
        return [said]

    def _update(self, update: Any) -> list[Message]:
        if not isinstance(update, dict):
            return []
        kind = str_field(update.get("type"))
        content = str_field(update.get("content"))
        if kind == "text_end" and content:
            self._turn.texts.append(content)
            return [Message(MessageType.TEXT, content=content)]
        if kind == "thinking_end" and content:
            return [Message(MessageType.THINKING, content=content)]
        return []

    def _tool(self, phase: str, event: Mapping[str, Any]) -> list[Message]:
        call_id = str_field(event.get("toolCallId"))
        if phase == "start":
            args = event.get("args")
            return [
                Message(
                    MessageType.TOOL_USE,
                    tool=str_field(event.get("toolName")),
                    call_id=call_id,
                    input=args if isinstance(args, dict) else {"args": args},
                )
            ]
        if phase == "end":
            return [
                Message(
                    MessageType.TOOL_RESULT,
                    call_id=call_id,
                    output=_tool_output(event.get("result")),
                    is_error=event.get("isError") is True,
                )
            ]
        return []

    def _turn_end(self, message: Any) -> None:
        if not isinstance(message, dict) or message.get("role") != "assistant":
            return
        raw = message.get("usage")
        if isinstance(raw, dict):
            model = str_field(message.get("model")) or self.model or "unknown"
            spent = self._usage.setdefault(model, dict.fromkeys(_USAGE_KEYS, 0))
            for key in _USAGE_KEYS:
                spent[key] += max(0, int_field(raw.get(key)))
        if message.get("stopReason") == "error":
            error = str_field(message.get("errorMessage"))
            self._turn.error = error or "pi ended the turn with an error"

    def _retry_or_compaction(self, kind: str, event: Mapping[str, Any]) -> list[Message]:
        if kind == "auto_retry_start":
            attempt, most = int_field(event.get("attempt")), int_field(event.get("maxAttempts"))
            error = str_field(event.get("errorMessage"))
            return [Message(MessageType.LOG, content=f"pi retry {attempt}/{most}: {error}")]
        if kind == "auto_retry_end":
            if event.get("success") is not True and not self._failure:
                self._failure = str_field(event.get("finalError")) or "pi exhausted its retries"
            return []
        reason = str_field(event.get("reason"))
        what = "started" if kind == "compaction_start" else "ended"
        return [Message(MessageType.LOG, content=f"pi compaction ({reason}) {what}")]


def _tool_output(result: Any) -> str:
    """A tool's result as text: its text blocks, or the JSON Pi printed."""
    if isinstance(result, str):
        return result
    if isinstance(result, dict):
        blocks = result.get("content")
        if isinstance(blocks, list):
            return "".join(str_field(b.get("text")) for b in blocks if isinstance(b, dict))
    return json.dumps(result)
