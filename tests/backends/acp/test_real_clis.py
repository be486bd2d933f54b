"""The ACP backend driving real agent CLIs (OpenCode, Gemini CLI, the Claude Code ACP adapter)
offline against fake model APIs: detection, sessions resumed, the turn cancelled.

The whole-daemon scenarios (tool under the watchdog, stalls) are in
tests/daemon/test_acp_daemon.py. Skipped, with the install command as the reason, only when
a CLI is not installed.
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
from tests.fakes import anthropic_api
from tests.fakes.anthropic_api import Text, ToolUse, claude_env, fake_anthropic
from tests.fakes.chat_api import fake_chat, opencode_env
from tests.fakes.gemini_api import fake_gemini, gemini_env
from tests.fakes.openai_api import Answer, FakeOpenAI, Stall
from tests.fakes.real_cli import pinned_version, require_cli, survivors, tree_of

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
CLIS = [OPENCODE_CLI, GEMINI_CLI]


@pytest.fixture(params=CLIS, ids=[c.agent.name for c in CLIS])
def cli(request: pytest.FixtureRequest) -> Cli:
    return request.param  # type: ignore[no-any-return]


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
    version = await backend.detect()
    assert version == pinned_version(one.package)
    assert version == one.agent.min_version


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


@pytest.mark.parametrize(
    ("one", "notice"),
    [(OPENCODE_CLI, "was not found"), (GEMINI_CLI, "cannot resume session")],
    ids=["opencode", "gemini"],
)
async def test_session_not_resumed_starts_a_fresh_one(
    one: Cli, notice: str, tmp_path: Path
) -> None:
    """A session OpenCode does not know, or any session for Gemini CLI (whose load is not
    used): a fresh session in the same run, and the transcript says so."""
    backend = one.backend()
    async with one.fake([Answer("Fresh.")]) as api:
        env = one.env(tmp_path / "agent", api.url)
        spec = make_spec(env, tmp_path, resume_session_id="ses_unknown0000000000000000")
        async with backend.start(spec) as run:
            messages = [m for _, m in await drain(run)]
            result = await run.result()
    assert result.status is RunStatus.COMPLETED, result
    assert result.output == "Fresh."
    assert result.session_id not in ("", "ses_unknown0000000000000000")
    assert any(notice in m.content for m in messages if m.type is MessageType.STATUS)


async def test_leaving_mid_turn_cancels_and_kills_the_tree(cli: Cli, tmp_path: Path) -> None:
    """Leaving while the model stalls sends session/cancel, then nothing of the CLI survives."""
    backend = cli.backend()
    async with cli.fake([Stall("first-chunk")]) as api:
        env = cli.env(tmp_path / "agent", api.url)
        async with backend.start(make_spec(env, tmp_path)) as run:
            with anyio.fail_after(60):
                async for message in run.messages():
                    if message.type is MessageType.LOG and "chunk" in message.content:
                        break
            tree = tree_of(run.pid)
            assert tree and survivors(tree) == [p.pid for p in tree]
            left = time.monotonic()
        took = time.monotonic() - left
    assert survivors(tree) == []
    # session/cancel gets at most half the 1 s kill grace, the kill at most the grace.
    assert took < 0.5 + 1.0 + 1.0, took


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
