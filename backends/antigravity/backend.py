"""The Antigravity backend: `agy -p PROMPT`, plain text out, the session from its log file.

    agy -p PROMPT --dangerously-skip-permissions [--model M] --print-timeout 24h0m0s
        --log-file LOG [--conversation ID] --add-dir DIR [configured args] [task args]

As Multica's daemon runs it. agy has no event stream: every stdout line is a text message and
all of it is the answer, so a tool is never in flight for the watchdog (as in Multica). Its
print mode stops a turn after `--print-timeout` (5 minutes when not given, with no way to say
"none"): the daemon gives it a day and leaves stopping a stuck run to its own watchdogs and
wall-clock cap. The log file, in a private folder the daemon makes for the run (the
agent user's, so agy can write it), names the conversation to resume with `--conversation`,
a provider error (which fails the run: agy exits 0) and a print timeout (`timeout`). A
completed run with empty stdout takes its answer from agy's transcript — only when agy runs
as the daemon's own user: the transcript's folder is named by the log, which an agent user
writes, and root follows no path an agent names.

The runtime brief is the `AGENTS.md` in the work directory. No registry serves agy (it
installs from Google's own site), so its tests run the parser on recorded-format output.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from backends import api_errors
from backends.agent_cli import AgentCli
from backends.antigravity.log import AgyLog, read_log, transcript_answer
from backends.antigravity.models import antigravity_models
from backends.base import AgentRun, Message, MessageType, ParseStep, RunResult, RunSpec, RunStatus
from backends.cli_args import ArgRules, filter_args
from backends.json_lines import ended_early
from backends.models import Catalog
from backends.process import ProcessSpec, run_process
from daemon.boundary.beneath import fresh_dir_under, read_under, remove_under

LOG_NAME = "agy.log"
NO_CAP = 24 * 3600
"""Seconds given to `--print-timeout` when the task has no wall-clock cap."""
_LOG_LIMIT = 4 << 20
_TRANSCRIPT_LIMIT = 8 << 20

ARGS = ArgRules(
    cli="agy",
    reserved={"-p", "--print", "--prompt", "-i", "--prompt-interactive", "-c", "--continue",
              "--conversation", "--model", "--print-timeout", "--dangerously-skip-permissions",
              "--log-file", "--settings"},
    alone={"-i", "--prompt-interactive", "-c", "--continue", "--dangerously-skip-permissions",
           "-h", "--help", "--version"},
)  # fmt: skip


class AgyTextParser:
    """A `LineParser` for one `agy -p` process: each line is text; the log decides the rest."""

    def __init__(self, log_dir: Path, own_files: bool) -> None:
        self.session_not_found = False
        self._log_dir = log_dir
        self._own_files = own_files
        self._lines: list[str] = []

    def feed(self, line: str) -> ParseStep:
        """One stdout line: part of the answer."""
        text = line.rstrip("\n")
        self._lines.append(text)
        if not text.strip():
            return ParseStep()
        return ParseStep(messages=[Message(MessageType.TEXT, content=text)])

    def finish(self, exit_code: int | None, stderr_tail: str) -> RunResult:
        """The run's result: the exit, then what the log says."""
        log = read_log(read_under(self._log_dir, LOG_NAME, _LOG_LIMIT) or "")
        output = "\n".join(self._lines).strip("\n")
        session = log.conversation
        if exit_code != 0:
            return ended_early("agy", "it finished", exit_code, stderr_tail, "", session)
        if log.timed_out:
            error = "agy's print timeout elapsed before the agent answered (a long command "
            error += "likely outlived it)"
            return RunResult(RunStatus.TIMEOUT, error=error, session_id=session, exit_code=0)
        if log.provider_error:
            return RunResult(
                RunStatus.FAILED,
                error=f"agy provider error: {log.provider_error}",
                session_id=session,
                exit_code=0,
                failure_reason=api_errors.failure_reason(log.provider_error),
            )
        if not output.strip():
            output = self._recovered(log)
        return RunResult(RunStatus.COMPLETED, output=output, session_id=session, exit_code=0)

    def _recovered(self, log: AgyLog) -> str:
        """The answer from agy's transcript, when agy ran as the daemon's own user."""
        if not self._own_files or not log.conversation or not log.app_data:
            return ""
        place = f"brain/{log.conversation}/.system_generated/logs/transcript.jsonl"
        found = read_under(Path(log.app_data), place, _TRANSCRIPT_LIMIT)
        return transcript_answer(found or "")


class AntigravityBackend(AgentCli):
    """Runs the Antigravity CLI for a task, continuing its conversation when asked."""

    name = "antigravity"
    executable = "agy"

    async def models(self) -> Catalog:
        """The models `agy models` lists (`backends.antigravity.models`)."""
        return await antigravity_models(self)

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the CLI; leaving the context kills its process tree and removes its log."""
        return self._run(spec)

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        scratch = Path(tempfile.gettempdir())
        owner = spec.user.owner if spec.user is not None else None
        log_dir = fresh_dir_under(scratch, "agent-daemon-agy-", owner)
        try:
            parser = AgyTextParser(log_dir, own_files=spec.user is None)
            argv = self.argv(spec, log_dir / LOG_NAME)
            process = ProcessSpec.for_run(spec, argv, self.strip_markers(spec.env), b"")
            async with run_process(process, parser) as run:
                yield run
        finally:
            remove_under(scratch, log_dir.name)

    def argv(self, spec: RunSpec, log_file: Path) -> list[str]:
        """The command line for one run."""
        argv = self.command("-p", spec.prompt, "--dangerously-skip-permissions")
        model = spec.model or self.model
        if model:
            argv += ["--model", model]
        argv += ["--print-timeout", go_duration(NO_CAP)]
        argv += ["--log-file", str(log_file)]
        if spec.resume_session_id:
            argv += ["--conversation", spec.resume_session_id]
        argv += ["--add-dir", str(spec.workdir)]
        argv += filter_args(self.args, ARGS)
        argv += filter_args(spec.extra_args, ARGS)
        return argv


def go_duration(seconds: float) -> str:
    """Whole seconds (at least one) as Go prints a duration: `24h0m0s`, `20m0s`, `45s`."""
    total = max(1, int(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"
