"""JSON-RPC over stdio, the part ACP sessions and Codex's app-server share: our requests
numbered and matched to their answers, each line handed to what it is."""

from __future__ import annotations

import json
from collections.abc import Callable

from backends.acp import rpc
from backends.base import ParseStep


def _answer(request_id: object, result: object) -> rpc.Frame | None:
    return rpc.read_frame(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}))


def test_each_request_gets_the_next_id_and_its_answer_names_its_method() -> None:
    """Ids count up from 0; an answer is matched once, and an id never sent matches nothing."""
    calls = rpc.Calls()
    sent = [json.loads(calls.request(m, {})) for m in ("initialize", "session/new")]
    assert [(s["id"], s["method"]) for s in sent] == [(0, "initialize"), (1, "session/new")]
    second, first = _answer(1, {"sessionId": "s"}), _answer(0, "not an object")
    assert second is not None and first is not None
    assert calls.answered(second) == ("session/new", {"sessionId": "s"})
    assert calls.answered(first) == ("initialize", {})
    assert calls.answered(second) == ("", {"sessionId": "s"})  # answered already
    stray = _answer("7", {})
    assert stray is not None and calls.answered(stray) == ("", {})


def test_a_line_goes_to_the_handler_of_its_kind() -> None:
    """Answers, requests and notifications each reach their own handler; a blank line is
    nothing and a line that is no frame is invalid."""
    seen: list[str] = []

    def handler(kind: str) -> Callable[[rpc.Frame], ParseStep]:
        def handle(frame: rpc.Frame) -> ParseStep:
            seen.append(f"{kind} {frame.method or frame.id}")
            return ParseStep()

        return handle

    lines = [
        '{"jsonrpc": "2.0", "id": 3, "result": {}}',
        '{"jsonrpc": "2.0", "id": 9, "method": "session/request_permission", "params": {}}',
        '{"jsonrpc": "2.0", "method": "session/update", "params": {}}',
        "   ",
        "not json",
    ]
    steps = [
        rpc.dispatch(
            line,
            answer=handler("answer"),
            request=handler("request"),
            notification=handler("notification"),
        )
        for line in lines
    ]
    assert seen == ["answer 3", "request session/request_permission", "notification session/update"]
    assert [step.invalid for step in steps] == [False, False, False, False, True]
