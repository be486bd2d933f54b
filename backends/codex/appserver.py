"""One `codex app-server` run as a line parser: the handshake, the thread, one turn.

    → initialize                     (our first line, written at spawn)
    ← answer                         → initialized (notification)
    → thread/start                   or, given a thread to resume, thread/resume; a refused
                                     resume starts a fresh thread, and the transcript says so
    ← answer: the thread             → turn/start with the prompt
    ← item/*, thread/tokenUsage/*    → messages (`items.TurnItems`)
    ← item/*/requestApproval, …      answered at once: accepted (`approvals`)
    ← turn/completed                 → the result; stdin is closed and the server exits

The thread runs unsandboxed and never asks (`approvalPolicy: never`, `danger-full-access`),
as exec mode's `--dangerously-bypass-approvals-and-sandbox`: isolation is the deployment's
job. Requests that still come (an MCP server's elicitation, a permission) are accepted.

Notifications of other threads (a sub-agent's) and those that come while the thread is being
opened are not this turn's and are dropped (Codex 0.169.0 replays nothing of a resumed
thread; the e2e resume test checks that). Why a turn failed is read from its
error sentence, which is the one exec mode prints (`backends.codex.failure`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import anyio

from backends.acp import rpc
from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus
from backends.codex.approvals import answer_request
from backends.codex.failure import failure_reason, limit_resets
from backends.codex.items import TurnItems
from backends.json_lines import ended_early, str_field
from backends.resume import fresh_session_message

log = logging.getLogger(__name__)

_CLIENT = {"name": "agent-daemon", "title": "agent-daemon", "version": "1"}
_UNATTENDED = {"approvalPolicy": "never", "sandbox": "danger-full-access"}
_ABORTED = ("interrupted", "cancelled", "canceled", "aborted")


@dataclass(frozen=True, slots=True)
class Thread:
    """What one run asks of the server: the prompt, where, and which thread and model."""

    prompt: str
    cwd: str
    resume: str = ""
    model: str = ""
    instructions: str = ""
    effort: str = ""
    """The reasoning effort (`model_reasoning_effort`; "": the configuration's)."""
    service_tier: str = ""
    """The service tier (`serviceTier`; "": the configuration's)."""


class AppServerSession:
    """A `LineParser` that drives one `codex app-server` through one turn."""

    def __init__(self, thread: Thread, usage_model: str = "codex-default") -> None:
        self.thread = thread
        self.usage_model = usage_model
        """The model usage is reported under: the one asked for, else the configured one."""
        self.thread_id = ""
        self.waiting_for = "initialize"
        """The handshake request not answered yet ("" once the turn runs)."""
        self.turn_started = anyio.Event()
        self._turn_id = ""
        self._calls = rpc.Calls()
        self._items = TurnItems()
        self._result: RunResult | None = None

    def first_line(self) -> bytes:
        """The `initialize` request, written to stdin when the server starts."""
        params = {"clientInfo": _CLIENT, "capabilities": {"experimentalApi": True}}
        return self._calls.request("initialize", params)

    def timed_out(self, seconds: float) -> RunResult:
        """The result of a handshake the server did not answer within `seconds`."""
        error = f"codex app-server handshake timeout: {self.waiting_for} did not respond"
        self._result = RunResult(RunStatus.FAILED, error=f"{error} after {seconds:g}s")
        return self._result

    def feed(self, line: str) -> ParseStep:
        """Handle one line: answers, the server's requests, its notifications.

        The thread's status goes out as soon as the thread is there, as exec mode's
        `thread.started` does: from then on the idle window, not the first-output budget,
        bounds a model that goes quiet."""
        return self._handle(line)

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The turn's result; a server that stopped before the turn completed failed."""
        if self._result is not None:
            return replace(self._result, exit_code=exit_code)
        what = "the turn completed" if self._turn_id else f"answering {self.waiting_for}"
        early = ended_early(
            "codex app-server", what, exit_code, stderr_tail, self._items.last_text, self.thread_id
        )
        return replace(early, failure_reason=failure_reason(self._items.last_error))

    def _handle(self, line: str) -> ParseStep:
        return rpc.dispatch(
            line,
            answer=self._on_answer,
            request=lambda frame: ParseStep(replies=[answer_request(frame)]),
            notification=lambda frame: self._on_notification(frame.method, frame.params),
        )

    def _on_answer(self, frame: rpc.Frame) -> ParseStep:
        method, result = self._calls.answered(frame)
        if frame.error is not None and method == "thread/resume":
            error = rpc.describe_error(frame.error)
            log.warning("codex: thread/resume of %s refused: %s", self.thread.resume, error)
            notice = fresh_session_message(self.thread.resume)
            step = self._start_thread()
            step.messages.insert(0, notice)
            return step
        if frame.error is not None and method:
            return self._fail(f"codex {method} failed: {rpc.describe_error(frame.error)}")
        if method == "initialize":
            initialized = rpc.notification("initialized", {})
            step = self._resume_thread() if self.thread.resume else self._start_thread()
            step.replies.insert(0, initialized)
            return step
        if method in ("thread/start", "thread/resume"):
            thread = result.get("thread")
            self.thread_id = str_field(thread.get("id")) if isinstance(thread, dict) else ""
            if not self.thread_id:
                return self._fail(f"codex {method} answered without a thread id")
            return self._start_turn()
        if method == "turn/start":
            turn = result.get("turn")
            self._turn_id = self._turn_id or (
                str_field(turn.get("id")) if isinstance(turn, dict) else ""
            )
            self.waiting_for = ""
            self.turn_started.set()
        return ParseStep()

    def _thread_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"cwd": self.thread.cwd, **_UNATTENDED}
        if self.thread.model:
            params["model"] = self.thread.model
        if self.thread.instructions:
            # After Codex's own system prompt, as exec mode's `developer_instructions`.
            params["developerInstructions"] = self.thread.instructions
        if self.thread.effort:
            params["config"] = {"model_reasoning_effort": self.thread.effort}
        if self.thread.service_tier:
            params["serviceTier"] = self.thread.service_tier
        return params

    def _start_thread(self) -> ParseStep:
        self.waiting_for = "thread/start"
        return ParseStep(replies=[self._calls.request("thread/start", self._thread_params())])

    def _resume_thread(self) -> ParseStep:
        self.waiting_for = "thread/resume"
        params = {"threadId": self.thread.resume, **self._thread_params()}
        return ParseStep(replies=[self._calls.request("thread/resume", params)])

    def _start_turn(self) -> ParseStep:
        self.waiting_for = "turn/start"
        status = Message(
            MessageType.STATUS, content=f"Codex thread {self.thread_id}", session_id=self.thread_id
        )
        params: dict[str, Any] = {
            "threadId": self.thread_id,
            "input": [{"type": "text", "text": self.thread.prompt}],
        }
        # The turn's own fields, as Multica sets them on all three requests.
        if self.thread.effort:
            params["effort"] = self.thread.effort
        if self.thread.service_tier:
            params["serviceTier"] = self.thread.service_tier
        return ParseStep(messages=[status], replies=[self._calls.request("turn/start", params)])

    def _on_notification(self, method: str, params: Mapping[str, Any]) -> ParseStep:
        thread = params.get("threadId")
        if self.waiting_for not in ("turn/start", "") or (
            isinstance(thread, str) and thread != self.thread_id
        ):
            return ParseStep()
        if method == "turn/started":
            turn = params.get("turn")
            self._turn_id = str_field(turn.get("id")) if isinstance(turn, dict) else ""
            return ParseStep()
        if method == "turn/completed":
            turn = params.get("turn")
            return self._turn_end(turn if isinstance(turn, dict) else {})
        if self._result is not None:
            return ParseStep()
        messages = self._items.notification(method, params)
        return ParseStep(messages=messages or [])

    def _turn_end(self, turn: Mapping[str, Any]) -> ParseStep:
        turn_id = str_field(turn.get("id"))
        if self._result is not None or (self._turn_id and turn_id not in ("", self._turn_id)):
            return ParseStep()  # another turn's end (or ours, told twice)
        status = str_field(turn.get("status"))
        error = ""
        if status == "failed":
            said = turn.get("error")
            error = str_field(said.get("message")) if isinstance(said, dict) else ""
            error = error or self._items.last_error or "codex reported a failed turn"
        elif status in _ABORTED:
            error = f"codex turn {status}"
        usage = self._items.usage(self.usage_model)
        output = self._items.last_text
        self._result = RunResult(
            RunStatus.FAILED if error else RunStatus.COMPLETED,
            output=output,
            error=error,
            session_id=self.thread_id,
            usage=usage,
            failure_reason=failure_reason(error) if error else "",
            limit_resets=limit_resets(error),
        )
        final = Message(
            MessageType.RESULT,
            content=error or output,
            output=output,
            session_id=self.thread_id,
            is_error=bool(error),
            usage=usage,
        )
        return ParseStep(messages=[final], close_stdin=True)

    def _fail(self, error: str) -> ParseStep:
        self._result = RunResult(RunStatus.FAILED, error=error, session_id=self.thread_id)
        message = Message(MessageType.RESULT, content=error, is_error=True)
        return ParseStep(messages=[message], close_stdin=True)
