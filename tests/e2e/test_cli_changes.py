"""Agent CLIs that change under a running daemon, against the Multica-faithful server: an
upgrade in place reaches the server without a restart, and output no parser recognises fails
the task as `agent_error.unknown` naming the CLI, its version and the first line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backends.claude import ClaudeBackend
from tests.fakes.agent_cli import CLAUDE_ANSWER, NEW_SHAPE, write_cli
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio

CLAUDE_ONLY = {"MULTICA_SCRIPTED_BACKEND": "0"}


def fail_body(fake: MulticaFake, task_id: str) -> dict[str, Any]:
    (body,) = [r.body for r in fake.seen("fail") if task_id in r.path]
    assert isinstance(body, dict)
    return body


@pytest.mark.parametrize("linger", [0.0, 60.0], ids=["exits", "keeps-running"])
async def test_output_no_parser_knows_fails_the_task_as_unknown(
    tmp_path: Path, linger: float
) -> None:
    """A CLI printing JSON lines of a shape the parser does not know — then exiting, or going
    on past the first-output budget — fails its task `agent_error.unknown`, never an empty
    completion; the error names the CLI, its version and the first line."""
    cli = write_cli(tmp_path / "claude", "2.1.400 (Claude Code)", NEW_SHAPE, linger=linger)
    options = {
        **CLAUDE_ONLY,
        "MULTICA_CLAUDE_PATH": str(cli),
        "MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT": "1s",
        "MULTICA_AGENT_IDLE_RETRIES": "1",
    }
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **options):
        task_id = fake.queue_issue(provider="claude")
        task = await fake.finished(task_id)
    assert task.status == "failed"
    body = fail_body(fake, task_id)
    assert body["failure_reason"] == "agent_error.unknown"
    assert "claude 2.1.400" in body["error"] and NEW_SHAPE[0] in body["error"]
    assert NEW_SHAPE[1] not in body["error"]


# Known events around one this parser does not know, which carried the answer: a silent run.
SILENT_RUN = (
    json.dumps({"type": "system", "subtype": "init", "session_id": "s1"}),
    json.dumps({"type": "assistant_chunk", "text": "The answer, in a new event."}),
    json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": ""}),
)


@pytest.mark.parametrize("version", ["2.1.400", ClaudeBackend.tested_max])
async def test_unknown_events_and_no_output_above_the_tested_range_fail_as_unknown(
    tmp_path: Path, version: str
) -> None:
    """A CLI newer than the newest tested version whose run has unknown events and ends with
    no output fails `agent_error.unknown`, naming the CLI, its version and the unknown line;
    the same run from the newest tested version completes, as it always did."""
    cli = write_cli(tmp_path / "claude", f"{version} (Claude Code)", SILENT_RUN)
    options = {**CLAUDE_ONLY, "MULTICA_CLAUDE_PATH": str(cli)}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **options):
        task_id = fake.queue_issue(provider="claude")
        task = await fake.finished(task_id)
    if version == ClaudeBackend.tested_max:
        assert task.status == "completed"
        return
    assert task.status == "failed"
    body = fail_body(fake, task_id)
    assert body["failure_reason"] == "agent_error.unknown"
    assert "claude 2.1.400" in body["error"] and SILENT_RUN[1] in body["error"]


async def test_an_upgraded_cli_reports_its_new_version_without_a_restart(tmp_path: Path) -> None:
    """The CLI's executable is replaced while the daemon runs: the server is told the new
    version by the same daemon, on the same runtime, which then runs the new CLI's tasks."""
    cli = write_cli(tmp_path / "claude", "2.1.328 (Claude Code)")
    options = {
        **CLAUDE_ONLY,
        "MULTICA_CLAUDE_PATH": str(cli),
        "MULTICA_DAEMON_CLI_CHECK_INTERVAL": "100ms",
    }
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **options) as d:
        (runtime,) = fake.live_runtimes()
        assert "2.1.328" in fake.seen("register")[0].body["runtimes"][0]["version"]
        write_cli(cli, "2.1.400 (Claude Code)", NEW_SHAPE)

        def told() -> bool:
            return any("2.1.400" in r.body["runtimes"][0]["version"] for r in fake.seen("register"))

        await eventually(told, within=20)
        assert fake.live_runtimes() == [runtime]
        assert ("claude", "2.1.400 (Claude Code)") in d.worker.snapshot().agents
        assert d.worker.status == "running"
        # The next task runs the new CLI, named with its new version.
        task_id = fake.queue_issue(provider="claude")
        await fake.finished(task_id)
    assert "claude 2.1.400" in fail_body(fake, task_id)["error"]


async def test_a_cli_installed_while_the_daemon_runs_is_registered_and_runs_tasks(
    tmp_path: Path,
) -> None:
    """No Claude Code at the start; installed later at its configured path, it is found at
    the next check, registered beside the runtime already there, and runs its tasks."""
    cli = tmp_path / "claude"
    options = {"MULTICA_CLAUDE_PATH": str(cli), "MULTICA_DAEMON_CLI_CHECK_INTERVAL": "100ms"}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **options) as d:
        assert [r.provider for r in fake.live_runtimes()] == ["scripted"]
        write_cli(cli, "2.1.332 (Claude Code)", CLAUDE_ANSWER)
        await eventually(lambda: len(fake.live_runtimes()) == 2, within=20)
        assert "claude" in d.worker.backends
        task_id = fake.queue_issue(provider="claude")
        assert (await fake.finished(task_id)).status == "completed"


def npm_stub(root: Path) -> Path:
    """What npm leaves when a package's postinstall never ran: its `bin/` entry a placeholder
    the system cannot start, linked from where the CLI is looked for."""
    package = root / "node_modules" / "@anthropic-ai" / "claude-code"
    (package / "bin").mkdir(parents=True)
    manifest = {"name": "@anthropic-ai/claude-code", "scripts": {"postinstall": "node install.cjs"}}
    (package / "package.json").write_text(json.dumps(manifest))
    stub = package / "bin" / "claude.exe"
    stub.write_text("placeholder: the postinstall replaces this file\n")
    stub.chmod(0o755)
    return stub


@pytest.mark.parametrize("how", ["gone", "not-executable", "too-old"])
async def test_an_unusable_cli_is_taken_offline_with_why_and_comes_back(
    tmp_path: Path, how: str
) -> None:
    """A CLI that is gone, that the system will not start, or that is older than the backend
    takes is dropped: its runtime goes offline with the reason clients read (and, for an npm
    placeholder, the repair command), while the daemon goes on; put back, it is registered
    again."""
    cli = write_cli(tmp_path / "claude", "2.1.332 (Claude Code)", CLAUDE_ANSWER)
    options = {"MULTICA_CLAUDE_PATH": str(cli), "MULTICA_DAEMON_CLI_CHECK_INTERVAL": "100ms"}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **options) as d:
        (claude,) = [r for r in fake.live_runtimes() if r.provider == "claude"]
        if how == "gone":
            cli.unlink()
        elif how == "not-executable":
            stub = npm_stub(tmp_path / "npm")
            cli.unlink()
            cli.symlink_to(stub)
        else:
            write_cli(cli, "1.0.128 (Claude Code)")
        await eventually(lambda: claude.status == "offline", within=20)
        reason = claude.offline_reason
        assert reason is not None and "claude" not in d.worker.backends
        assert [r.status for r in fake.live_runtimes() if r.provider == "scripted"] == ["online"]
        if how == "gone":
            assert reason["code"] == "not_installed"
        elif how == "not-executable":
            assert reason["code"] == "not_executable" and str(stub) in reason["detail"]
            assert reason["repair"] == {
                "package": "@anthropic-ai/claude-code",
                "command": f"cd {stub.parent.parent} && node install.cjs",
                "shell": "bash",
            }
        else:
            assert reason == {
                "code": "version_too_old",
                "detail": "claude 1.0.128 (Claude Code) is older than 2.0.0, the oldest this "
                "daemon runs",
            }
        if cli.is_symlink():
            cli.unlink()
        write_cli(cli, "2.1.332 (Claude Code)", CLAUDE_ANSWER)
        await eventually(lambda: claude.status == "online", within=20)
        task_id = fake.queue_issue(provider="claude")
        assert (await fake.finished(task_id)).status == "completed"
