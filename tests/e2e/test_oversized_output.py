"""An agent's oversized output never costs the transcript or the result on the real server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from daemon.protocol.limits import CONTENT_CAP, INPUT_DEPTH, RESULT_CAP
from tests.helpers import serving_daemon

pytestmark = pytest.mark.anyio

# A `command` agent that runs its prompt as Python, with `emit` writing one protocol line.
AGENT = (
    "import json, sys\nemit = lambda m: print(json.dumps(m), flush=True)\nexec(sys.stdin.read())\n"
)
MIB = 1024 * 1024


async def run(tmp_path: Path, code: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run `code` as a task's agent on the embedded server: the task and its transcript."""
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    env = {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(agent)}
    async with serving_daemon(tmp_path, **env) as d:
        task_id = await d.submit(code, backend="command")
        task = await d.wait(task_id, within=60)
        return task, await d.api.messages(task_id)


async def test_megabyte_lines_are_all_stored_and_the_longest_cut(tmp_path: Path) -> None:
    """20 text lines of 1 MiB and one of 3 MiB, then a short one: every message is stored
    (batches fit the server's 16 MiB), the 3 MiB one cut with a marker."""
    code = (
        "for i in range(20):\n"
        "    emit({'type': 'text', 'content': str(i % 10) * (1 << 20)})\n"
        "emit({'type': 'text', 'content': 'y' * (3 << 20)})\n"
        "emit({'type': 'text', 'content': 'after'})\n"
        "emit({'type': 'result', 'output': 'done'})\n"
    )
    task, messages = await run(tmp_path, code)
    assert task["status"] == "completed"
    assert [m["seq"] for m in messages] == list(range(1, 23))
    assert [m["content"] for m in messages[:20]] == [str(i % 10) * MIB for i in range(20)]
    cut = messages[20]["content"]
    assert cut.startswith("y" * CONTENT_CAP)
    assert cut.endswith(f"[{3 * MIB - CONTENT_CAP} more bytes not sent]")
    assert messages[21]["content"] == "after"


async def test_a_twenty_megabyte_result_completes_cut(tmp_path: Path) -> None:
    """A 20 MiB result is cut to its cap with a marker and the task completes."""
    code = "emit({'type': 'result', 'output': 'r' * (20 << 20)})\n"
    task, _ = await run(tmp_path, code)
    assert task["status"] == "completed", task["status"]
    output = task["output"]
    assert len(output.encode()) <= RESULT_CAP
    assert output.startswith("r" * (RESULT_CAP - 100))
    assert output.endswith("more bytes not sent]")


def depth_of(value: Any) -> tuple[int, Any]:
    """How many `deep`/`a` levels a stored input keeps, and what is at the bottom."""
    levels = 0
    while isinstance(value, dict) and value:
        value = value.get("deep", value.get("a"))
        levels += 1
    return levels, value


async def test_a_tool_input_nested_198_deep_does_not_cost_the_transcript(tmp_path: Path) -> None:
    """A tool input nested past the server's parser limit is cut in depth with a marker; the
    messages around it are stored."""
    code = (
        "nested = {}\n"
        "cur = nested\n"
        "for _ in range(197):\n"
        "    cur['a'] = {}\n"
        "    cur = cur['a']\n"
        "emit({'type': 'text', 'content': 'before'})\n"
        "emit({'type': 'tool_use', 'tool': 'Bash', 'call_id': 'c1', 'input': {'deep': nested}})\n"
        "emit({'type': 'tool_result', 'call_id': 'c1', 'output': 'ok'})\n"
        "emit({'type': 'text', 'content': 'after'})\n"
        "emit({'type': 'result', 'output': 'done'})\n"
    )
    task, messages = await run(tmp_path, code)
    assert task["status"] == "completed"
    assert [(m["seq"], m["type"]) for m in messages] == [
        (1, "text"),
        (2, "tool_use"),
        (3, "tool_result"),
        (4, "text"),
    ]
    levels, bottom = depth_of(messages[1]["input"])
    assert levels == INPUT_DEPTH
    assert bottom == f"… [nested deeper than {INPUT_DEPTH} levels, not sent]"
    assert messages[3]["content"] == "after"
