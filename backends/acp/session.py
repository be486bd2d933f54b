"""One ACP run as a line parser: the handshake, the session, the prompt, and its answer.

    → initialize                     (our first line, written at spawn)
    ← answer: the agent's capabilities
    → session/new                    or, given a session to resume, session/resume when the
                                     agent offers it, else session/load when it offers that
    ← answer: the session id         (a refused resume/load: a fresh session/new, said so)
    → session/set_model              a model the CLI takes no flag for (or the model config
                                     option, session/set_config_option, where offered)
    → session/set_config_option      the thinking level, through the effort option the
                                     session advertises (an agent whose entry says so)
    → session/prompt
    ← session/update notifications   → messages (`updates.SessionUpdates`)
    ← session/request_permission     answered at once with the allow option
    ← answer: the stop reason        → the result; stdin is closed and the agent exits

Every request the agent makes is answered at once (`requests`), so it never waits on a
headless daemon; a granted permission starts the call it was asked for. A thinking level the
session cannot take (no effort option, a level it does not offer, a refused or unconfirmed
change) is logged and the prompt goes out all the same, as in Multica: the level is the
agent's setting, not the task's condition. The levels offered are those of the options the
last answer showed; after `session/set_model`, whose answer shows none, the change is asked
for and the agent's answer decides.
Updates before the prompt is sent (a loaded session replaying its history) are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio

from backends.acp import rpc
from backends.acp.agent import AcpAgent
from backends.acp.effort import confirmed, effort_option
from backends.acp.requests import answer_request
from backends.acp.updates import SessionUpdates
from backends.acp.usage import turn_usage
from backends.base import Message, MessageType, ParseStep, RunResult, RunStatus
from backends.json_lines import ended_early, str_field
from backends.resume import fresh_session_message

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
_CLIENT = {"name": "agent-daemon", "version": "1"}
_MODEL_SWITCHES = ("session/set_model", "session/set_config_option")
_EFFORT = "effort"
"""The pending request that sets the thinking level (a `session/set_config_option`)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """What one run asks of the agent: the prompt, where, and which session and model."""

    prompt: Sequence[str]
    """Text blocks, in order (empty ones are left out)."""
    cwd: str
    resume: str = ""
    model: str = ""
    mcp_servers: Sequence[Mapping[str, Any]] = ()
    effort: str = ""
    """The thinking level, set through the session's effort option ("": left as it is)."""


class AcpSession:
    """A `LineParser` that drives one agent (its table entry) through one prompt turn."""

    def __init__(self, agent: AcpAgent, turn: Turn) -> None:
        self.label = agent.label
        self.provider = agent.provider
        self.resume = turn.resume
        self.model = turn.model
        self.session_id = ""
        self.opened = anyio.Event()
        self.answered = anyio.Event()
        self.prompting = False
        self._prompt = [{"type": "text", "text": text} for text in turn.prompt if text]
        self._cwd = turn.cwd
        self._set_model = not agent.model_flag
        self._resumes = agent.resumes
        self._mcp = list(turn.mcp_servers)
        self._effort = turn.effort
        self._effort_id = ""
        self._state: Mapping[str, Any] = {}
        self._capabilities: dict[str, Any] = {}
        self._calls = rpc.Calls()
        self._updates = SessionUpdates(pending_runs=agent.pending_runs)
        self._result: RunResult | None = None
        self._held: list[Message] = []
        self._speaking = False

    def first_line(self) -> bytes:
        """The `initialize` request, written to stdin when the agent starts."""
        return self._calls.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
                "clientInfo": _CLIENT,
            },
        )

    def cancel_line(self) -> bytes | None:
        """`session/cancel` while the prompt runs, else None (nothing to cancel)."""
        if not self.prompting or self.answered.is_set():
            return None
        return rpc.notification("session/cancel", {"sessionId": self.session_id})

    def feed(self, line: str) -> ParseStep:
        """Handle one line from the agent: answers, its requests, its notifications.

        The status messages of the handshake (the session, a fresh one instead of the one to
        resume) are held until the agent says something of its own in the turn: answering
        our handshake is not output, and a CLI may think for many seconds before its first
        model call, which the daemon's first-output budget, not its idle window, is for."""
        step = self._handle(line)
        if not self._speaking:
            if any(m.type is not MessageType.STATUS for m in step.messages):
                step.messages[:0] = self._held
                self._held, self._speaking = [], True
            else:
                self._held += step.messages
                step.messages = []
        return step

    def _handle(self, line: str) -> ParseStep:
        return rpc.dispatch(
            line, answer=self._on_answer, request=self._on_request, notification=self._on_update
        )

    def _on_update(self, frame: rpc.Frame) -> ParseStep:
        if frame.method == "session/update" and self.prompting:
            update = frame.params.get("update")
            if isinstance(update, dict):
                return ParseStep(messages=self._updates.apply(update))
            return ParseStep(invalid=True)
        return ParseStep()

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The turn's result; an agent that stopped before answering the prompt failed."""
        if self._result is not None:
            return replace(self._result, exit_code=exit_code)
        what = "answering its prompt" if self.prompting else "starting its session"
        return ended_early(
            self.label, what, exit_code, stderr_tail, self._updates.answer(), self.session_id
        )

    def _on_answer(self, frame: rpc.Frame) -> ParseStep:
        method, result = self._calls.answered(frame)
        if method == "initialize":
            if frame.error is not None:
                return self._fail(f"initialize failed: {rpc.describe_error(frame.error)}")
            capabilities = result.get("agentCapabilities")
            self._capabilities = capabilities if isinstance(capabilities, dict) else {}
            return self._open()
        if method in ("session/resume", "session/load"):
            if frame.error is not None:
                log.warning(
                    "%s: %s of session %s refused: %s; starting a fresh session",
                    self.label,
                    method,
                    self.resume,
                    rpc.describe_error(frame.error),
                )
                return self._new_session(self._not_found())
            self.session_id = str_field(result.get("sessionId")) or self.resume
            return self._opened(result)
        if method == "session/new":
            if frame.error is not None:
                return self._fail(f"session/new failed: {rpc.describe_error(frame.error)}")
            self.session_id = str_field(result.get("sessionId"))
            if not self.session_id:
                return self._fail("session/new answered without a session id")
            return self._opened(result)
        if method in _MODEL_SWITCHES:
            if frame.error is not None:
                error = rpc.describe_error(frame.error)
                return self._fail(f"could not switch to model {self.model!r}: {error}")
            # A config change answers with the options as they are now; set_model with none.
            current = method == "session/set_config_option"
            return self._set_effort(result if current else self._state, current=current)
        if method == _EFFORT:
            self._effort_answered(frame, result)
            return self._send_prompt()
        if method == "session/prompt":
            return self._on_prompt_answer(frame, result)
        return ParseStep()

    def _open(self) -> ParseStep:
        if not self.resume:
            return self._new_session()
        sessions = self._capabilities.get("sessionCapabilities")
        base = {"sessionId": self.resume, "cwd": self._cwd, "mcpServers": self._mcp}
        if self._resumes and isinstance(sessions, dict) and "resume" in sessions:
            return ParseStep(replies=[self._calls.request("session/resume", base)])
        if self._resumes and self._capabilities.get("loadSession") is True:
            return ParseStep(replies=[self._calls.request("session/load", base)])
        text = f"{self.label} cannot resume session {self.resume}; started a fresh session instead."
        return self._new_session([fresh_session_message(self.resume, text)])

    def _new_session(self, notice: list[Message] | None = None) -> ParseStep:
        params = {"cwd": self._cwd, "mcpServers": self._mcp}
        opening = self._calls.request("session/new", params)
        return ParseStep(messages=notice or [], replies=[opening])

    def _not_found(self) -> list[Message]:
        return [fresh_session_message(self.resume)]

    def _opened(self, result: Mapping[str, Any]) -> ParseStep:
        self.opened.set()
        self._state = result
        requested, self.model = self.model, self.model or _current_model(result)
        status = Message(
            MessageType.STATUS,
            content=f"{self.label} session {self.session_id}",
            session_id=self.session_id,
        )
        if self._set_model and requested and requested != _current_model(result):
            method, params = _model_switch(result, self.session_id, requested)
            return ParseStep(messages=[status], replies=[self._calls.request(method, params)])
        step = self._set_effort(result, current=True)
        step.messages.insert(0, status)
        return step

    def _set_effort(self, state: Mapping[str, Any], *, current: bool) -> ParseStep:
        """Ask for the thinking level before the prompt, where the session can take it."""
        level = self._effort
        if not level:
            return self._send_prompt()
        option = effort_option(state)
        if option is None or not option.levels:
            log.warning("%s: the session offers no reasoning effort; %r not set", self.label, level)
            return self._send_prompt()
        if current and not option.offers(level):
            offered = ", ".join(lvl.value for lvl in option.levels)
            log.warning(
                "%s: the session offers reasoning efforts %s, not %r; not set",
                self.label,
                offered,
                level,
            )
            return self._send_prompt()
        self._effort_id = option.config_id
        params = {"sessionId": self.session_id, "configId": option.config_id, "value": level}
        return ParseStep(
            replies=[self._calls.request(_EFFORT, params, wire="session/set_config_option")]
        )

    def _effort_answered(self, frame: rpc.Frame, result: Mapping[str, Any]) -> None:
        level, config_id = self._effort, self._effort_id
        if frame.error is not None:
            error = rpc.describe_error(frame.error)
            log.warning("%s: reasoning effort %r refused: %s", self.label, level, error)
            return
        now = confirmed(result, config_id)
        if now != level:
            log.warning(
                "%s: reasoning effort %r asked for, the session says %r",
                self.label,
                level,
                now or "nothing",
            )
            return
        log.info("%s: reasoning effort %s (%s)", self.label, level, config_id)

    def _send_prompt(self) -> ParseStep:
        self.prompting = True
        params = {"sessionId": self.session_id, "prompt": self._prompt}
        return ParseStep(replies=[self._calls.request("session/prompt", params)])

    def _on_prompt_answer(self, frame: rpc.Frame, result: Mapping[str, Any]) -> ParseStep:
        messages = self._updates.flush()
        answer = self._updates.answer()
        usage = turn_usage(result, self.provider, self.model or "unknown")
        reason = str_field(result.get("stopReason"))
        error = ""
        if frame.error is not None:
            error = f"session/prompt failed: {rpc.describe_error(frame.error)}"
        elif reason == "cancelled":
            error = f"{self.label} cancelled the turn"
        elif reason == "refusal" and not answer:
            error = f"{self.label} refused the prompt"
        elif reason not in ("", "end_turn"):
            messages.append(Message(MessageType.STATUS, content=f"{self.label} stopped: {reason}"))
        self._result = RunResult(
            RunStatus.FAILED if error else RunStatus.COMPLETED,
            output=answer,
            error=error,
            session_id=self.session_id,
            usage=usage,
        )
        messages.append(
            Message(
                MessageType.RESULT,
                content=error or answer,
                output=answer,
                session_id=self.session_id,
                is_error=bool(error),
                usage=usage,
            )
        )
        self.answered.set()
        return ParseStep(messages=messages, close_stdin=True)

    def _on_request(self, frame: rpc.Frame) -> ParseStep:
        reply = answer_request(frame, self.label)
        granted = [] if reply.granted is None else self._updates.granted(reply.granted)
        return ParseStep(messages=granted, replies=[reply.line])

    def _fail(self, error: str) -> ParseStep:
        self._result = RunResult(RunStatus.FAILED, error=error, session_id=self.session_id)
        self.answered.set()
        message = Message(MessageType.RESULT, content=error, is_error=True)
        return ParseStep(messages=[message], close_stdin=True)


def _model_switch(
    result: Mapping[str, Any], session_id: str, model: str
) -> tuple[str, dict[str, Any]]:
    """How this agent switches a session's model: a `model` config option when it offers
    one (OpenCode), else `session/set_model`."""
    for option in result.get("configOptions") or []:
        if isinstance(option, dict) and option.get("id") == "model":
            params = {"sessionId": session_id, "configId": "model", "value": model}
            return "session/set_config_option", params
    return "session/set_model", {"sessionId": session_id, "modelId": model}


def _current_model(result: Mapping[str, Any]) -> str:
    """The model a new session runs on, where the agent says (`models` or a config option)."""
    models = result.get("models")
    if isinstance(models, dict) and str_field(models.get("currentModelId")):
        return str_field(models.get("currentModelId"))
    for option in result.get("configOptions") or []:
        if isinstance(option, dict) and option.get("id") == "model":
            return str_field(option.get("currentValue"))
    return ""
