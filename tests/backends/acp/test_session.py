"""The ACP client's side of a session, driven line by line as an agent would drive it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from backends.acp.agent import AcpAgent
from backends.acp.session import AcpSession, Turn
from backends.base import Message, MessageType, RunStatus, Usage
from tests.backends.support import results_named_after_calls

pytestmark = pytest.mark.anyio

SESSION = "ses_1"
INIT = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}


class Agent:
    """Plays the agent: answers our requests, sends updates, keeps what we wrote and emitted."""

    def __init__(self, session: AcpSession) -> None:
        self.session = session
        self.sent: list[dict[str, Any]] = [json.loads(session.first_line())]
        self.messages: list[Message] = []
        self.closed = False
        self.invalid = 0

    def line(self, frame: dict[str, Any] | str) -> None:
        step = self.session.feed(frame if isinstance(frame, str) else json.dumps(frame))
        self.sent += [json.loads(reply) for reply in step.replies]
        self.messages += step.messages
        self.closed = self.closed or step.close_stdin
        self.invalid += step.invalid

    def answer(self, result: dict[str, Any]) -> None:
        """Answer our last request."""
        self.line({"jsonrpc": "2.0", "id": self.sent[-1]["id"], "result": result})

    def refuse(self, message: str, code: int = -32603) -> None:
        error = {"code": code, "message": message}
        self.line({"jsonrpc": "2.0", "id": self.sent[-1]["id"], "error": error})

    def update(self, **update: Any) -> None:
        params = {"sessionId": SESSION, "update": update}
        self.line({"jsonrpc": "2.0", "method": "session/update", "params": params})

    def chunk(self, text: str, kind: str = "agent_message_chunk") -> None:
        self.update(sessionUpdate=kind, content={"type": "text", "text": text})

    def prompting(self, initialize: dict[str, Any] | None = None) -> None:
        """Handshake and session until the prompt is sent."""
        self.answer(initialize or INIT)
        self.answer({"sessionId": SESSION})
        assert self.sent[-1]["method"] == "session/prompt"

    def methods(self) -> list[str]:
        return [m.get("method", "") for m in self.sent if "method" in m]

    def of(self, kind: MessageType) -> list[Message]:
        return [m for m in self.messages if m.type is kind]


def start(resume: str = "", model: str = "", **entry: Any) -> Agent:
    """A session of an agent whose table entry has `entry` (no model flag by default)."""
    agent = AcpAgent("agent", "Agent", "agent", (), "", **{"provider": "test", **entry})
    return Agent(AcpSession(agent, Turn(["Do the task."], "/work", resume, model)))


def test_handshake_opens_a_session_and_sends_the_prompt() -> None:
    """initialize, session/new in the work dir, then the prompt with the session id."""
    agent = start()
    agent.prompting()
    assert agent.methods() == ["initialize", "session/new", "session/prompt"]
    assert agent.sent[1]["params"] == {"cwd": "/work", "mcpServers": []}
    prompt = agent.sent[2]["params"]
    assert prompt == {"sessionId": SESSION, "prompt": [{"type": "text", "text": "Do the task."}]}


def test_session_status_waits_for_the_agents_first_output() -> None:
    """Answering the handshake is not output: the session's status comes with the first
    thing the agent says in the turn, so the first-output budget covers its thinking."""
    agent = start()
    agent.prompting()
    assert agent.messages == []
    agent.chunk("Hi")
    status, chunk = agent.messages
    assert status.type is MessageType.STATUS and status.session_id == SESSION
    assert chunk.type is MessageType.LOG


def test_answer_completes_with_joined_text_usage_and_closed_stdin() -> None:
    """Text chunks become one text message; the prompt's answer is the completed result."""
    agent = start()
    agent.prompting()
    for piece in ("Hel", "lo", "."):
        agent.chunk(piece)
    assert agent.of(MessageType.TEXT) == []
    assert len(agent.of(MessageType.LOG)) == 3  # each chunk is activity
    usage = {"inputTokens": 100, "outputTokens": 12, "cachedReadTokens": 20}
    agent.answer({"stopReason": "end_turn", "usage": usage})
    assert [m.content for m in agent.of(MessageType.TEXT)] == ["Hello."]
    (final,) = agent.of(MessageType.RESULT)
    assert final.output == "Hello." and final.session_id == SESSION and not final.is_error
    assert agent.closed
    result = agent.session.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.output == "Hello."
    assert result.usage == (Usage("test", "unknown", 100, 12, 20, 0),)


def test_gemini_usage_is_read_per_model_from_meta() -> None:
    """Gemini CLI's per-model token counts under `_meta.quota` become the run's usage."""
    agent = start(provider="google")
    agent.prompting()
    counts = {"input_tokens": 300, "output_tokens": 30}
    quota = {"token_count": counts, "model_usage": [{"model": "g-1", "token_count": counts}]}
    agent.answer({"stopReason": "end_turn", "_meta": {"quota": quota}})
    assert agent.session.finish(0, "").usage == (Usage("google", "g-1", 300, 30),)


def test_thinking_then_text_are_two_messages() -> None:
    """A switch from thought to answer ends the thinking message."""
    agent = start()
    agent.prompting()
    agent.chunk("Let me think", "agent_thought_chunk")
    agent.chunk("Answer")
    agent.answer({"stopReason": "end_turn"})
    kinds = [m.type for m in agent.messages if m.type in (MessageType.THINKING, MessageType.TEXT)]
    assert kinds == [MessageType.THINKING, MessageType.TEXT]


def test_running_tool_is_a_tool_use_until_its_result() -> None:
    """pending → in_progress → completed: tool_use when it runs, tool_result with the output."""
    agent = start(pending_runs=False)
    agent.prompting()
    call = {"toolCallId": "c1", "title": "bash", "kind": "execute"}
    agent.update(sessionUpdate="tool_call", status="pending", rawInput={}, **call)
    assert agent.of(MessageType.TOOL_USE) == []
    agent.update(
        sessionUpdate="tool_call_update", toolCallId="c1", status="in_progress",
        rawInput={"command": "sleep 10"},
    )  # fmt: skip
    (use,) = agent.of(MessageType.TOOL_USE)
    assert use.call_id == "c1" and use.tool == "execute" and use.input
    assert use.input["command"] == "sleep 10"
    agent.update(sessionUpdate="tool_call_update", toolCallId="c1", status="in_progress")
    assert agent.messages[-1].heartbeat  # output while it runs is never activity
    agent.update(
        sessionUpdate="tool_call_update", toolCallId="c1", status="completed",
        rawOutput={"output": "slept\n"},
    )  # fmt: skip
    (done,) = agent.of(MessageType.TOOL_RESULT)
    assert done.call_id == "c1" and done.output == "slept\n" and not done.is_error


def test_pending_tool_runs_for_an_agent_that_never_says_in_progress() -> None:
    """By default a call runs from its first frame, pending or not."""
    agent = start()
    agent.prompting()
    agent.update(sessionUpdate="tool_call", toolCallId="c1", title="Terminal", status="pending")
    assert [m.call_id for m in agent.of(MessageType.TOOL_USE)] == ["c1"]


def test_failed_tool_is_an_error_result_and_text_after_it_is_the_output() -> None:
    """A failed call's result is an error; the answer is the text after the last tool."""
    agent = start()
    agent.prompting()
    agent.chunk("I will run it.")
    agent.update(sessionUpdate="tool_call", toolCallId="c1", kind="execute", status="in_progress")
    agent.update(
        sessionUpdate="tool_call_update", toolCallId="c1", status="failed",
        content=[{"type": "content", "content": {"type": "text", "text": "no such file"}}],
    )  # fmt: skip
    agent.chunk("It failed.")
    agent.answer({"stopReason": "end_turn"})
    (done,) = agent.of(MessageType.TOOL_RESULT)
    assert done.is_error and done.output == "no such file"
    assert agent.session.finish(0, "").output == "It failed."


def test_permission_is_granted_once_and_starts_the_call() -> None:
    """A permission request is answered at once with allow_once; the call runs from then."""
    agent = start(pending_runs=False)
    agent.prompting()
    options = [
        {"optionId": "always", "kind": "allow_always"},
        {"optionId": "once", "kind": "allow_once"},
        {"optionId": "no", "kind": "reject_once"},
    ]
    tool_call = {"toolCallId": "c1", "title": "sleep 10", "kind": "execute", "status": "pending"}
    params = {"sessionId": SESSION, "options": options, "toolCall": tool_call}
    agent.line(
        {"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": params}
    )
    assert agent.sent[-1] == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"outcome": {"outcome": "selected", "optionId": "once"}},
    }
    assert [m.call_id for m in agent.of(MessageType.TOOL_USE)] == ["c1"]


def test_permission_without_an_allow_option_is_still_answered() -> None:
    """Only a reject offered: it is selected, so the agent never waits; nothing: an error."""
    agent = start()
    agent.prompting()
    only_reject = {"options": [{"optionId": "no", "kind": "reject_once"}]}
    agent.line({"jsonrpc": "2.0", "id": 1, "method": "session/request_permission",
                "params": only_reject})  # fmt: skip
    assert agent.sent[-1]["result"]["outcome"]["optionId"] == "no"
    agent.line({"jsonrpc": "2.0", "id": 2, "method": "session/request_permission", "params": {}})
    assert agent.sent[-1]["id"] == 2 and "error" in agent.sent[-1]


def test_other_agent_requests_are_refused_not_left_waiting() -> None:
    """A request the daemon does not serve (a terminal) gets "method not found"."""
    agent = start()
    agent.prompting()
    agent.line({"jsonrpc": "2.0", "id": "t1", "method": "terminal/create", "params": {}})
    assert agent.sent[-1]["id"] == "t1" and agent.sent[-1]["error"]["code"] == -32601


def test_malformed_lines_are_counted_and_skipped() -> None:
    """Not JSON, not a frame, an update that is not an object: invalid, and the run goes on."""
    agent = start()
    agent.prompting()
    agent.line("Loading configuration...")
    agent.line({"jsonrpc": "2.0"})
    agent.line({"jsonrpc": "2.0", "method": "session/update", "params": {"update": 5}})
    assert agent.invalid == 3
    agent.chunk("Still fine.")
    agent.answer({"stopReason": "end_turn"})
    assert agent.session.finish(0, "").status is RunStatus.COMPLETED


def test_resume_uses_session_resume_when_offered() -> None:
    """Given a session and an agent offering resume, the session is resumed, not replaced."""
    agent = start(resume="old")
    agent.answer({"agentCapabilities": {"sessionCapabilities": {"resume": {}}}})
    assert agent.sent[-1]["method"] == "session/resume"
    assert agent.sent[-1]["params"]["sessionId"] == "old"
    agent.answer({})
    assert agent.sent[-1]["method"] == "session/prompt"
    assert agent.sent[-1]["params"]["sessionId"] == "old"


def test_agent_that_does_not_resume_gets_a_fresh_session_and_a_notice() -> None:
    """An entry that opts out of resuming starts fresh even where load is offered."""
    agent = start(resume="old", resumes=False)
    agent.answer(INIT)
    assert agent.methods()[-1] == "session/new"
    agent.answer({"sessionId": "fresh"})
    agent.answer({"stopReason": "end_turn"})
    assert "cannot resume session old" in agent.messages[0].content


def test_loaded_history_is_not_replayed_into_the_transcript() -> None:
    """session/load replays the old turns as updates; only the new turn's updates count."""
    agent = start(resume="old")
    agent.answer(INIT)
    assert agent.sent[-1]["method"] == "session/load"
    agent.chunk("an old answer")
    agent.answer({})
    agent.chunk("New answer.")
    agent.answer({"stopReason": "end_turn"})
    assert [m.content for m in agent.of(MessageType.TEXT)] == ["New answer."]


def test_refused_load_falls_back_to_a_fresh_session_and_says_so() -> None:
    """A session the agent does not know: a fresh session in the same process, with a notice."""
    agent = start(resume="gone")
    agent.answer(INIT)
    agent.refuse("Session not found")
    assert agent.methods()[-1] == "session/new"
    agent.answer({"sessionId": "fresh"})
    agent.answer({"stopReason": "end_turn"})
    assert "Session gone was not found" in agent.messages[0].content
    assert agent.session.finish(0, "").session_id == "fresh"


def test_model_is_switched_through_the_config_option_when_offered() -> None:
    """A configured model the session is not on: set_config_option (OpenCode's way)."""
    agent = start(model="p/m2")
    agent.answer(INIT)
    option = {"id": "model", "currentValue": "p/m1"}
    agent.answer({"sessionId": SESSION, "configOptions": [option]})
    assert agent.sent[-1]["method"] == "session/set_config_option"
    assert agent.sent[-1]["params"]["value"] == "p/m2"
    agent.answer({})
    assert agent.sent[-1]["method"] == "session/prompt"


def test_refused_model_switch_fails_the_run() -> None:
    """A model the agent refuses fails the run rather than running on another model."""
    agent = start(model="nope")
    agent.answer(INIT)
    agent.answer({"sessionId": SESSION, "models": {"currentModelId": "default"}})
    assert agent.sent[-1]["method"] == "session/set_model"
    agent.refuse("unknown model")
    result = agent.session.finish(0, "")
    assert result.status is RunStatus.FAILED and "nope" in result.error
    assert agent.closed


def test_prompt_error_and_cancelled_turn_fail_the_run() -> None:
    """An error answer to the prompt, or a cancelled stop, is a failed run."""
    agent = start()
    agent.prompting()
    agent.refuse("model overloaded")
    assert "model overloaded" in agent.session.finish(0, "").error
    agent = start()
    agent.prompting()
    agent.answer({"stopReason": "cancelled"})
    assert agent.session.finish(None, "").status is RunStatus.FAILED


def test_agent_gone_before_the_answer_fails_with_its_stderr() -> None:
    """An agent that exits mid-turn fails the run, saying how far it got."""
    agent = start()
    agent.prompting()
    result = agent.session.finish(1, "Failed query: CREATE TABLE")
    assert result.status is RunStatus.FAILED
    assert "before answering its prompt" in result.error and "CREATE TABLE" in result.error


async def test_cancel_is_offered_only_while_the_prompt_runs() -> None:
    """session/cancel names the session while the turn runs; not before, not after."""
    agent = start()
    assert agent.session.cancel_line() is None
    agent.prompting()
    line = agent.session.cancel_line()
    assert line is not None
    assert json.loads(line) == {
        "jsonrpc": "2.0",
        "method": "session/cancel",
        "params": {"sessionId": SESSION},
    }
    agent.answer({"stopReason": "cancelled"})
    assert agent.session.cancel_line() is None


def test_tool_results_are_named_after_their_calls_once_transcribed() -> None:
    """An ACP update ending a call names only its id: the result reaches the transcript under
    the call's kind."""
    agent = start()
    agent.prompting()
    agent.update(sessionUpdate="tool_call", toolCallId="c1", kind="execute", status="in_progress")
    agent.update(sessionUpdate="tool_call_update", toolCallId="c1", status="completed")
    assert results_named_after_calls(agent.messages) == [("execute", "execute")]


EFFORT = {
    "id": "effort",
    "category": "thought_level",
    "currentValue": "low",
    "options": [{"value": "low"}, {"value": "high"}],
}


def effort_session(level: str, model: str = "") -> Agent:
    agent = AcpAgent(name="x", label="X", command="x", acp_args=("acp",), effort=True)
    return Agent(AcpSession(agent, Turn(("Go.",), "/w", model=model, effort=level)))


def test_a_thinking_level_the_session_offers_is_set_before_the_prompt() -> None:
    """`session/set_config_option` on the advertised option, then the prompt, whatever the
    agent confirms (a level it confirms otherwise is only logged)."""
    for confirmed in ("high", "low"):
        agent = effort_session("high")
        agent.answer(INIT)
        agent.answer({"sessionId": SESSION, "configOptions": [EFFORT]})
        asked = agent.sent[-1]
        assert (asked["method"], asked["params"]) == (
            "session/set_config_option",
            {"sessionId": SESSION, "configId": "effort", "value": "high"},
        )
        agent.answer({"configOptions": [{**EFFORT, "currentValue": confirmed}]})
        assert agent.sent[-1]["method"] == "session/prompt"


def test_a_level_the_session_does_not_offer_is_not_asked_for() -> None:
    """No effort option, or one without the level: the prompt goes out at once."""
    for options in ([], [EFFORT]):
        agent = effort_session("max")
        agent.answer(INIT)
        agent.answer({"sessionId": SESSION, "configOptions": options})
        assert agent.methods()[-1] == "session/prompt"
        assert "session/set_config_option" not in agent.methods()


def test_after_a_model_switch_the_level_follows_the_new_models_options() -> None:
    """The model's config change answers with its options: the level is checked against
    those; a refused level change still sends the prompt."""
    agent = effort_session("high", model="other")
    agent.answer(INIT)
    model = {"id": "model", "currentValue": "first", "options": [{"value": "other"}]}
    agent.answer({"sessionId": SESSION, "configOptions": [model]})
    assert agent.sent[-1]["params"]["configId"] == "model"
    agent.answer({"configOptions": [model, EFFORT]})
    assert agent.sent[-1]["params"] == {"sessionId": SESSION, "configId": "effort", "value": "high"}
    agent.refuse("no such level")
    assert agent.sent[-1]["method"] == "session/prompt"
