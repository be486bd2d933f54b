"""The Codex backend driving the real CLI against a fake OpenAI Responses API on loopback."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from backends.base import AgentRun, Message, MessageType, RunSpec, RunStatus, Usage
from backends.codex import CodexBackend
from backends.version import parse_version
from daemon.testing import survivors
from tests.backends.support import drain
from tests.fakes.openai_api import (
    MODEL,
    USAGE,
    Answer,
    ApiError,
    Shell,
    Stall,
    codex_env,
    codex_home,
    fake_openai,
)
from tests.fakes.real_cli import ON_EVERY_CODEX_PIN, InstalledCli, tree_of

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]

ONE_REQUEST = Usage(
    "codex",
    MODEL,
    input_tokens=USAGE["input_tokens"] - USAGE["cached_tokens"],
    output_tokens=USAGE["output_tokens"],
    cache_read_tokens=USAGE["cached_tokens"],
)


@pytest.fixture
def codex(codex_cli: InstalledCli) -> CodexBackend:
    return CodexBackend(codex_cli.path)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def make_spec(url: str, tmp_path: Path, workdir: Path, **fields: Any) -> RunSpec:
    """A run spec whose CODEX_HOME sends model calls to the fake, kept per test."""
    env = codex_env(tmp_path / "home", codex_home(tmp_path / "codex-home", url))
    return RunSpec(prompt="Do the task.", workdir=workdir, env=env, **fields)


def of_type(messages: Sequence[Message], kind: MessageType) -> list[Message]:
    return [m for m in messages if m.type is kind]


@ON_EVERY_CODEX_PIN
async def test_detect_reports_the_installed_version(
    codex: CodexBackend, codex_cli: InstalledCli
) -> None:
    """`detect` answers with the version of the CLI the tests installed."""
    line = await codex.detect()
    assert line is not None and parse_version(line) == codex_cli.version


async def test_plain_answer_completes_with_output_thread_and_usage(
    codex: CodexBackend, tmp_path: Path, workdir: Path
) -> None:
    """An answer completes the run with its text, the thread id and the request's usage."""
    async with (
        fake_openai([Answer("All done here.")]) as api,
        codex.start(make_spec(api.url, tmp_path, workdir)) as run,
    ):
        messages = await drain(run)
        result = await run.result()
    assert messages[0].type is MessageType.STATUS and messages[0].session_id
    assert [m.content for m in of_type(messages, MessageType.TEXT)] == ["All done here."]
    assert result.status is RunStatus.COMPLETED
    assert result.output == "All done here."
    assert result.session_id == messages[0].session_id
    assert result.usage == (ONE_REQUEST,)
    assert [r.path for r in api.requests] == ["/v1/responses"]


async def test_instructions_become_a_developer_message(
    codex: CodexBackend, tmp_path: Path, workdir: Path
) -> None:
    """Task instructions reach the model as developer input; the work dir stays untouched."""
    instructions = 'Always answer in haiku. Quote: "ok"\nSecond line.'
    async with fake_openai([Answer()]) as api:
        spec = make_spec(api.url, tmp_path, workdir, instructions=instructions)
        async with codex.start(spec) as run:
            await drain(run)
            assert (await run.result()).status is RunStatus.COMPLETED
    inputs = api.main_requests()[0].body["input"]
    developer = [c["text"] for i in inputs if i.get("role") == "developer" for c in i["content"]]
    assert instructions in developer
    assert [p async for p in anyio.Path(workdir).iterdir()] == []


@ON_EVERY_CODEX_PIN
async def test_shell_command_round_trips(
    codex: CodexBackend, tmp_path: Path, workdir: Path
) -> None:
    """A command that sleeps yields tool_use then tool_result, and the run completes; the
    parser knows every event the pinned CLI printed."""
    script = [Shell("sleep 2 && echo slept"), Answer("The command finished.")]
    async with (
        fake_openai(script) as api,
        codex.start(make_spec(api.url, tmp_path, workdir)) as run,
    ):
        messages = await drain(run)
        result = await run.result()
    tools = [m for m in messages if m.type in (MessageType.TOOL_USE, MessageType.TOOL_RESULT)]
    assert [m.type for m in tools] == [MessageType.TOOL_USE, MessageType.TOOL_RESULT]
    use, done = tools
    assert use.input is not None and "sleep 2 && echo slept" in use.input["command"]
    assert done.call_id == use.call_id and done.output == "slept\n" and not done.is_error
    assert result.status is RunStatus.COMPLETED
    assert result.output == "The command finished."
    assert api.main_requests()[1].n_tool_outputs == 1
    assert [m.unrecognised for m in messages if m.unrecognised] == []


async def test_stalled_api_leaves_the_cli_silent_and_leaving_kills_its_tree(
    codex: CodexBackend, tmp_path: Path, workdir: Path
) -> None:
    """While the API sends nothing the CLI emits nothing; leaving the context kills its tree."""
    seen: list[Message] = []

    async def collect(run: AgentRun) -> None:
        async for message in run.messages():
            seen.append(message)

    async with fake_openai([Stall()]) as api:
        async with (
            codex.start(make_spec(api.url, tmp_path, workdir)) as run,
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
    assert MessageType.RESULT not in [m.type for m in seen]


async def test_api_error_fails_with_the_cli_error_text(
    codex: CodexBackend, tmp_path: Path, workdir: Path
) -> None:
    """A server error the CLI does not retry fails the run with the CLI's message."""
    async with (
        fake_openai([ApiError()]) as api,
        codex.start(make_spec(api.url, tmp_path, workdir)) as run,
    ):
        messages = await drain(run)
        result = await run.result()
    assert result.status is RunStatus.FAILED
    assert "high demand" in result.error
    assert of_type(messages, MessageType.RESULT)[0].is_error


async def test_resume_continues_the_thread_and_counts_only_its_usage(
    codex: CodexBackend, tmp_path: Path, workdir: Path
) -> None:
    """A second run with the first run's thread id resumes it; usage is the second run's own."""
    async with fake_openai([Answer("First answer."), Answer("Second answer.")]) as api:
        async with codex.start(make_spec(api.url, tmp_path, workdir)) as run:
            await drain(run)
            first = await run.result()
        spec = make_spec(api.url, tmp_path, workdir, resume_session_id=first.session_id)
        async with codex.start(spec) as run:
            messages = await drain(run)
            second = await run.result()
    assert second.status is RunStatus.COMPLETED
    assert second.session_id == first.session_id
    assert second.output == "Second answer."
    assert not any("was not found" in m.content for m in messages)
    assert api.main_requests()[1].n_inputs > api.main_requests()[0].n_inputs
    # The CLI reports the thread's total (two requests); only this run's request counts.
    assert second.usage == (ONE_REQUEST,)


async def test_unknown_thread_falls_back_to_a_fresh_one(
    codex: CodexBackend, tmp_path: Path, workdir: Path
) -> None:
    """Resuming a thread the CLI does not know starts a fresh thread and says so."""
    unknown = str(uuid.uuid4())
    async with fake_openai([Answer("Fresh answer.")]) as api:
        spec = make_spec(api.url, tmp_path, workdir, resume_session_id=unknown)
        async with codex.start(spec) as run:
            messages = await drain(run)
            result = await run.result()
    assert messages[0].type is MessageType.STATUS
    assert f"Session {unknown} was not found" in messages[0].content
    assert result.status is RunStatus.COMPLETED
    assert result.output == "Fresh answer."
    assert result.session_id not in ("", unknown)
    assert len(api.main_requests()) == 1
