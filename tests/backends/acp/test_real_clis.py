"""The ACP backend driving real agent CLIs (OpenCode, Gemini CLI, the Claude Code ACP adapter)
offline against fake model APIs: detection, a session resumed, a third agent from its entry.

The whole-daemon scenarios (a tool under the watchdog, stalls, the kill) are in
tests/e2e/test_acp_daemon.py; cancelling and the fresh-session fallback are tested on a
small agent process (test_backend.py) and line by line (test_session.py), where they cost
no CLI start. Skipped, with the install command as the reason, only when a CLI is not
installed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from backends.acp import AcpAgent, AcpBackend
from backends.acp.catalog import CLAUDE_ACP
from backends.base import AgentRun, Message, MessageType, RunSpec, RunStatus, Usage
from backends.gemini import GEMINI
from backends.opencode import OPENCODE
from backends.version import parse_version
from tests.fakes import anthropic_api
from tests.fakes.anthropic_api import Text, ToolUse, claude_env, fake_anthropic
from tests.fakes.chat_api import fake_chat, opencode_env
from tests.fakes.gemini_api import fake_gemini, gemini_env
from tests.fakes.openai_api import Answer, FakeOpenAI
from tests.fakes.real_cli import pinned_version, require_cli

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


@dataclass(frozen=True)
class Cli:
    """One real CLI: its table entry, npm package, fake API and environment."""

    agent: AcpAgent
    package: str
    fake: Callable[..., AbstractAsyncContextManager[FakeOpenAI]]
    env: Callable[[Path, str], dict[str, str]]

    def backend(self) -> AcpBackend:
        name = self.agent.name.upper().replace("-", "_")
        return AcpBackend(self.agent, require_cli(self.agent.command, f"MULTICA_TEST_{name}_PATH"))


OPENCODE_CLI = Cli(OPENCODE, "opencode-ai", fake_chat, opencode_env)
GEMINI_CLI = Cli(GEMINI, "@google/gemini-cli", fake_gemini, gemini_env)


def make_spec(env: dict[str, str], tmp_path: Path, **fields: Any) -> RunSpec:
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return RunSpec(prompt="Do the task.", workdir=workdir, env=env, kill_grace=1.0, **fields)


async def drain(run: AgentRun, bound: float = 60) -> list[tuple[float, Message]]:
    """Every message with the time it arrived."""
    messages: list[tuple[float, Message]] = []
    with anyio.fail_after(bound):
        async for message in run.messages():
            messages.append((time.monotonic(), message))
    return messages


@pytest.mark.parametrize(
    "one", [OPENCODE_CLI, GEMINI_CLI, Cli(CLAUDE_ACP, "@agentclientprotocol/claude-agent-acp",
                                         fake_chat, opencode_env)],
    ids=["opencode", "gemini", "claude-acp"],
)  # fmt: skip
async def test_detect_reports_the_pinned_version_at_least_the_minimum(one: Cli) -> None:
    """`detect` answers with the installed version, which meets the backend's minimum."""
    backend = one.backend()
    line = await backend.detect()
    assert line is not None
    assert parse_version(line) == pinned_version(one.package) == one.agent.min_version


async def test_second_opencode_run_resumes_the_first_session(tmp_path: Path) -> None:
    """A run given the first run's session id continues it (session/resume), not a new one."""
    backend = OPENCODE_CLI.backend()
    async with fake_chat([Answer("First."), Answer("Second.")]) as api:
        env = opencode_env(tmp_path / "agent", api.url)
        async with backend.start(make_spec(env, tmp_path)) as run:
            await drain(run)
            first = await run.result()
        async with backend.start(
            make_spec(env, tmp_path, resume_session_id=first.session_id)
        ) as run:
            messages = [m for _, m in await drain(run)]
            second = await run.result()
    assert first.status is RunStatus.COMPLETED and first.session_id
    assert second.status is RunStatus.COMPLETED, second
    assert second.output == "Second."
    assert second.session_id == first.session_id
    assert not any("fresh session" in m.content for m in messages)
    calls = api.main_requests()
    assert calls[1].n_inputs > calls[0].n_inputs  # the first turn is in the second's history


async def test_claude_adapter_tool_is_in_flight_while_it_runs(tmp_path: Path) -> None:
    """The Claude Code ACP adapter, from its table entry alone: a 5 s command is a tool_use
    from its start to its result, and the answer and usage come back."""
    backend = AcpBackend(
        CLAUDE_ACP, require_cli(CLAUDE_ACP.command, "MULTICA_TEST_CLAUDE_ACP_PATH")
    )
    script = [ToolUse("sleep 5 && echo slept"), Text("Slept well.")]
    async with fake_anthropic(script) as api:
        spec = make_spec(claude_env(api.url, tmp_path / "home"), tmp_path)
        async with backend.start(spec) as run:
            timed = await drain(run)
            result = await run.result()
    uses = [(t, m) for t, m in timed if m.type is MessageType.TOOL_USE]
    results = [(t, m) for t, m in timed if m.type is MessageType.TOOL_RESULT]
    assert len(uses) == 1 and len(results) == 1
    (started, use), (ended, done) = uses[0], results[0]
    assert done.call_id == use.call_id and "slept" in done.output
    assert ended - started >= 4.5  # reported while it ran, not after
    assert result.status is RunStatus.COMPLETED, result
    assert result.output == "Slept well."
    counts = anthropic_api.USAGE
    assert result.usage == (
        Usage(
            "anthropic",
            result.usage[0].model,
            input_tokens=2 * counts["input_tokens"],
            output_tokens=2 * counts["output_tokens"],
            cache_read_tokens=2 * counts["cache_read_input_tokens"],
            cache_write_tokens=2 * counts["cache_creation_input_tokens"],
        ),
    )
    assert api.main_requests()[1].n_tool_results == 1
