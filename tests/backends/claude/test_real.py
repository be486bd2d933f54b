"""The Claude Code backend driving the real CLI against a fake Anthropic API on loopback."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from backends.base import AgentRun, Message, MessageType, RunSpec, RunStatus, Usage
from backends.claude import ClaudeBackend
from backends.version import parse_version
from daemon.testing import survivors
from tests.backends.support import drain
from tests.fakes.anthropic_api import (
    USAGE,
    ApiError,
    Stall,
    Text,
    ToolUse,
    claude_env,
    fake_anthropic,
)
from tests.fakes.real_cli import ON_EVERY_CLAUDE_PIN, InstalledCli, tree_of

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

# The model the CLI picks when none is configured (see the recorded transcripts).
DEFAULT_MODEL = "claude-opus-5-5"
ONE_REQUEST = Usage(
    "claude",
    DEFAULT_MODEL,
    input_tokens=USAGE["input_tokens"],
    output_tokens=USAGE["output_tokens"],
    cache_read_tokens=USAGE["cache_read_input_tokens"],
    cache_write_tokens=USAGE["cache_creation_input_tokens"],
)


@pytest.fixture
def claude(claude_cli: InstalledCli) -> ClaudeBackend:
    return ClaudeBackend(claude_cli.path)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def make_spec(
    url: str,
    tmp_path: Path,
    workdir: Path,
    extra_env: Mapping[str, str] | None = None,
    **fields: Any,
) -> RunSpec:
    """A run spec whose environment points the CLI at the fake, with a HOME kept per test."""
    env = claude_env(url, tmp_path / "home", **(extra_env or {}))
    return RunSpec(prompt="Do the task.", workdir=workdir, env=env, **fields)


def kinds(messages: Sequence[Message]) -> list[MessageType]:
    return [m.type for m in messages]


@ON_EVERY_CLAUDE_PIN
async def test_detect_reports_the_installed_version(
    claude: ClaudeBackend, claude_cli: InstalledCli
) -> None:
    """`detect` answers with the version of the CLI the tests installed."""
    line = await claude.detect()  # the whole line, as Multica shows it: `2.1.328 (Claude Code)`
    assert line is not None and parse_version(line) == claude_cli.version


async def test_plain_answer_completes_with_output_session_and_usage(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """A text answer completes the run with the text, the session id and the request's usage."""
    async with (
        fake_anthropic([Text("All done here.")]) as api,
        claude.start(make_spec(api.url, tmp_path, workdir)) as run,
    ):
        messages = await drain(run)
        result = await run.result()
    assert kinds(messages) == [MessageType.STATUS, MessageType.TEXT, MessageType.RESULT]
    assert result.status is RunStatus.COMPLETED
    assert result.output == "All done here."
    assert result.session_id and messages[0].session_id == result.session_id
    assert result.usage == (ONE_REQUEST,)
    assert [r.path for r in api.requests] == ["/v1/messages?beta=true"]


class _Beat:
    """The transcript's beat, every half second, counting the reads held for it."""

    def __init__(self) -> None:
        self.holds = 0

    def interval(self) -> float:
        return 0.5

    async def hold(self) -> None:
        self.holds += 1
        await anyio.sleep(0.5)

    def release(self) -> None:
        pass


@ON_EVERY_CLAUDE_PIN
async def test_a_quick_answer_is_read_as_it_is_printed(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """The start-up lines, the answer and the result come within a beat: no read waits for
    the beat the agent's reads share with its transcript, so the result is read as it is
    printed, and the CLI's exit after it as it exits."""
    beat = _Beat()
    async with (
        fake_anthropic([Text("Quick.")]) as api,
        claude.start(make_spec(api.url, tmp_path, workdir, read_beat=beat)) as run,
    ):
        messages = await drain(run)
        result = await run.result()
    assert kinds(messages) == [MessageType.STATUS, MessageType.TEXT, MessageType.RESULT]
    assert result.status is RunStatus.COMPLETED
    assert beat.holds == 0


async def test_instructions_reach_the_system_prompt(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """Task instructions are appended to the system prompt and leave the work dir untouched."""
    async with fake_anthropic([Text()]) as api:
        spec = make_spec(api.url, tmp_path, workdir, instructions="Always answer in haiku.")
        async with claude.start(spec) as run:
            await drain(run)
            assert (await run.result()).status is RunStatus.COMPLETED
    assert "Always answer in haiku." in api.main_requests()[0].system
    assert [p async for p in anyio.Path(workdir).iterdir()] == []


@ON_EVERY_CLAUDE_PIN
async def test_bash_tool_call_round_trips(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """A Bash call that sleeps 3 s yields tool_use then tool_result, and the run completes;
    the parser knows every event the pinned CLI printed."""
    script = [ToolUse("sleep 3 && echo slept"), Text("The command finished.")]
    async with (
        fake_anthropic(script) as api,
        claude.start(make_spec(api.url, tmp_path, workdir)) as run,
    ):
        messages = await drain(run)
        result = await run.result()
    tools = [m for m in messages if m.type in (MessageType.TOOL_USE, MessageType.TOOL_RESULT)]
    assert kinds(tools) == [MessageType.TOOL_USE, MessageType.TOOL_RESULT]
    use, done = tools
    assert use.tool == "Bash" and use.input is not None
    assert use.input["command"] == "sleep 3 && echo slept"
    assert done.call_id == use.call_id and not done.is_error
    assert done.output == "slept"
    assert result.status is RunStatus.COMPLETED
    assert result.output == "The command finished."
    assert api.main_requests()[1].n_tool_results == 1
    assert [m.unrecognised for m in messages if m.unrecognised] == []


async def test_permission_prompt_is_answered_with_allow(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """With prompts routed to stdin, the CLI's permission request is allowed and the tool runs."""
    backend = ClaudeBackend(
        claude.path, ["--permission-mode", "default", "--permission-prompt-tool", "stdio"]
    )
    script = [ToolUse("touch made-by-tool.txt"), Text("Created.")]
    async with (
        fake_anthropic(script) as api,
        backend.start(make_spec(api.url, tmp_path, workdir)) as run,
    ):
        messages = await drain(run)
        result = await run.result()
    assert result.status is RunStatus.COMPLETED
    assert (workdir / "made-by-tool.txt").exists()
    (done,) = [m for m in messages if m.type is MessageType.TOOL_RESULT]
    assert not done.is_error


async def test_stalled_api_leaves_the_cli_silent_and_leaving_kills_its_tree(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """While the API sends nothing the CLI emits nothing; leaving the context kills its tree."""
    seen: list[Message] = []

    async def collect(run: AgentRun) -> None:
        async for message in run.messages():
            seen.append(message)

    async with fake_anthropic([Stall()]) as api:
        async with (
            claude.start(make_spec(api.url, tmp_path, workdir)) as run,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(collect, run)
            with anyio.fail_after(30):
                await api.wait_main_requests(1)
            await anyio.sleep(0.5)
            before = len(seen)
            await anyio.sleep(3)
            assert len(seen) == before
            tree = tree_of(run.pid)
            assert tree and survivors(tree) == tree
            tg.cancel_scope.cancel()
        assert survivors(tree) == []
    assert MessageType.RESULT not in kinds(seen)


async def test_overloaded_api_fails_with_the_cli_error_text(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """529 on every attempt: retries show as status messages and the run fails with the error."""
    async with fake_anthropic([ApiError()] * 3) as api:
        spec = make_spec(api.url, tmp_path, workdir, extra_env={"CLAUDE_CODE_MAX_RETRIES": "2"})
        async with claude.start(spec) as run:
            messages = await drain(run)
            result = await run.result()
    assert result.status is RunStatus.FAILED
    assert "API Error: 529 fake server scripted error 529" in result.error
    retries = [m for m in messages if m.type is MessageType.STATUS and "retry" in m.content]
    assert len(retries) == 2
    assert len(api.main_requests()) == 3


async def test_resume_continues_the_session(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """A second run with the first run's session id resumes it and counts only its own usage."""
    async with fake_anthropic([Text("First answer."), Text("Second answer.")]) as api:
        async with claude.start(make_spec(api.url, tmp_path, workdir)) as run:
            await drain(run)
            first = await run.result()
        spec = make_spec(api.url, tmp_path, workdir, resume_session_id=first.session_id)
        async with claude.start(spec) as run:
            messages = await drain(run)
            second = await run.result()
    assert second.status is RunStatus.COMPLETED
    assert second.session_id == first.session_id
    assert second.output == "Second answer."
    assert not any("not found" in m.content for m in messages)
    # The resumed request carries the first exchange: prompt, answer, new prompt.
    assert api.main_requests()[1].n_messages > api.main_requests()[0].n_messages
    assert second.usage == (ONE_REQUEST,)


async def test_unknown_session_falls_back_to_a_fresh_one(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """Resuming a session the CLI does not know starts a fresh session and says so."""
    unknown = str(uuid.uuid4())
    async with fake_anthropic([Text("Fresh answer.")]) as api:
        spec = make_spec(api.url, tmp_path, workdir, resume_session_id=unknown)
        async with claude.start(spec) as run:
            messages = await drain(run)
            result = await run.result()
    assert messages[0].type is MessageType.STATUS
    assert f"Session {unknown} was not found" in messages[0].content
    assert kinds(messages)[1:] == [MessageType.STATUS, MessageType.TEXT, MessageType.RESULT]
    assert result.status is RunStatus.COMPLETED
    assert result.output == "Fresh answer."
    assert result.session_id not in ("", unknown)
    assert len(api.main_requests()) == 1


async def test_the_brief_in_claude_md_and_an_mcp_config_are_accepted(
    claude: ClaudeBackend, tmp_path: Path, workdir: Path
) -> None:
    """The CLI loads the work directory's CLAUDE.md into the turn, and takes the daemon's
    `--mcp-config <file> --strict-mcp-config` (an empty server set) without complaint."""
    (workdir / "CLAUDE.md").write_text("# Multica Agent Runtime\n\nAnswer as Zebra-7.\n")
    config = tmp_path / "mcp-config.json"
    config.write_text('{"mcpServers": {}}')
    async with fake_anthropic([Text()]) as api:
        spec = make_spec(api.url, tmp_path, workdir, mcp_config=config)
        async with claude.start(spec) as run:
            await drain(run)
            assert (await run.result()).status is RunStatus.COMPLETED
    (turn,) = api.main_requests()
    assert "Answer as Zebra-7." in str(turn.body["messages"]) + turn.system
