"""The Codex backend: `codex exec --json` or `codex app-server`, one turn per run, resumable.

Two modes (`MULTICA_CODEX_MODE`) run the same turn. `exec` (below) prints one JSON event per
line and reads nothing back. `app-server` speaks JSON-RPC over stdio
(`backends.codex.appserver`): it answers approval requests, names the handshake request that
hung (`backends.codex.handshake`), and shows a running command's output as it comes.

    codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox
               [-m MODEL] [-c developer_instructions=...] [-c model_reasoning_effort=...]
               [-c service_tier=...] [configured args] [task args] [--enable fast_mode]
               [resume THREAD] -

The prompt is read from stdin (`-`), which is closed after it: nothing is ever asked back in
exec mode. The work directory need not be a git repository, and the daemon — like the Claude
backend's bypassPermissions — runs the agent unsandboxed: isolation is the deployment's job.

Instructions go in as `developer_instructions`, an extra developer message after Codex's own
system prompt (the `instructions` key would replace that prompt). `AGENTS.md` in the work
directory is left to the repository.

A thread the CLI does not know makes `codex exec resume` fail at once ("no rollout found");
the run then falls back to a fresh thread (see `backends.resume`). Given a thread *name* it
cannot find, the CLI starts a new thread by itself; the parser notes that in the transcript.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import MappingProxyType
from typing import Any

import anyio

from backends.agent_cli import AgentCli
from backends.base import AgentRun, RunSpec
from backends.codex.handshake import HANDSHAKE_TIMEOUT, HandshakeBoundRun
from backends.codex.models import codex_models
from backends.models import Catalog
from backends.process import ProcessSpec, run_process
from backends.resume import Launch, start_session
from daemon.boundary.beneath import opened_dir, read_at

log = logging.getLogger(__name__)

EXEC = "exec"
APP_SERVER = "app-server"
MODES = (EXEC, APP_SERVER)
APP_SERVER_ARGS = ("app-server", "--listen", "stdio://")
BASE_ARGS = (
    "exec",
    "--json",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
)

# Set by a running Codex for its own tool processes; a daemon started from inside a Codex
# session must not hand them on.
SESSION_MARKERS = frozenset(
    {
        "CODEX_SESSION_ID",
        "CODEX_THREAD_ID",
        "CODEX_TOOL_CALL_ID",
        "CODEX_SANDBOX",
        "CODEX_SANDBOX_NETWORK_DISABLED",
        "CODEX_CI",
    }
)

FAST_TIER = "priority"
FAST_MODE = "fast_mode"
# Given twice, a clap flag is an error; the daemon already asks for JSON.
_RESERVED_FLAGS = ("--json",)
_CONFIG_LIMIT = 1024 * 1024


class CodexBackend(AgentCli):
    """Runs the Codex CLI for a task; resumes threads and falls back when one is gone."""

    name = "codex"
    min_version = "0.100.0"
    tested_max = "0.171.0"
    session_markers = SESSION_MARKERS
    prefix_reserved = MappingProxyType({"--json": False, "--listen": True})

    def __init__(
        self,
        *args: Any,
        mode: str = EXEC,
        handshake_timeout: float = HANDSHAKE_TIMEOUT,
        **kwargs: Any,
    ) -> None:
        """`mode` is `exec` or `app-server`; the rest as for every agent CLI."""
        super().__init__(*args, **kwargs)
        if mode not in MODES:
            raise ValueError(f"codex mode {mode!r} is not one of {MODES}")
        self.mode = mode
        self.handshake_timeout = handshake_timeout

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[AgentRun]:
        """Start the CLI; leaving the context kills its process tree."""
        return self._run(spec)

    async def models(self) -> Catalog:
        """The catalog bundled with the installed CLI (`debug models --bundled`)."""
        return await codex_models(self)

    @asynccontextmanager
    async def _run(self, spec: RunSpec) -> AsyncIterator[AgentRun]:
        # A run's parsers are imported by the first run: detecting the CLI at start-up, before
        # the daemon registers, needs none of them (tests/daemon/test_imports.py).
        from backends.codex.events import CodexEventParser
        from backends.codex.rollouts import rollout_totals

        home = codex_home(spec.env)
        reader = spec.user.owner if spec.user else None
        model = spec.model or self.model
        if not model:
            model = await anyio.to_thread.run_sync(configured_model, home, reader)
        if self.mode == APP_SERVER:
            async with self._serve(spec, model) as served:
                yield served
            return
        thread = spec.resume_session_id
        baseline = {}
        if thread:
            baseline = await anyio.to_thread.run_sync(
                rollout_totals, home, thread, reader, spec.codex_sessions
            )

        def launch(resume: str) -> Launch:
            # A fresh thread's usage starts at zero: the baseline is the resumed thread's.
            parser = CodexEventParser(
                model, resume, baseline if resume else None, self.version, self.tested_max
            )
            return self._spec(spec, resume), parser

        async with start_session(self.name, thread, launch) as run:
            yield run

    @asynccontextmanager
    async def _serve(self, spec: RunSpec, model: str) -> AsyncIterator[AgentRun]:
        """One turn through `codex app-server`: it resumes (or refuses) the thread itself."""
        from backends.codex.appserver import AppServerSession, Thread

        thread = Thread(
            spec.prompt,
            str(spec.workdir),
            spec.resume_session_id,
            spec.model or self.model,
            spec.instructions,
            spec.thinking_level,
            spec.service_tier,
        )
        session = AppServerSession(thread, model)
        argv = self.command(
            *APP_SERVER_ARGS, *filter_args(self.args), *filter_args(spec.extra_args)
        )
        argv += fast_mode(spec.service_tier)
        process = ProcessSpec.for_run(
            spec, argv, self.env(spec), session.first_line(), keep_stdin_open=True
        )
        async with run_process(process, session) as run:
            yield HandshakeBoundRun(run, session, self.handshake_timeout)

    def argv(self, spec: RunSpec, resume: str = "") -> list[str]:
        """The command line for one run (configured and task arguments filtered)."""
        argv = self.command(*BASE_ARGS)
        model = spec.model or self.model
        if model:
            argv += ["--model", model]
        if spec.instructions:
            # exec mode takes them nowhere else (the app-server mode takes them in-band); the
            # daemon gives Codex none, its brief is AGENTS.md: say so when someone does.
            log.warning(
                "codex: instructions on the command line, readable by every local user in "
                "/proc/<pid>/cmdline (mount /proc with hidepid=2, or MULTICA_CODEX_MODE=app-server)"
            )
            # JSON string syntax is valid TOML basic-string syntax, escapes included.
            argv += ["-c", f"developer_instructions={json.dumps(spec.instructions)}"]
        if spec.thinking_level:
            argv += ["-c", f"model_reasoning_effort={json.dumps(spec.thinking_level)}"]
        if spec.service_tier:
            argv += ["-c", f"service_tier={json.dumps(spec.service_tier)}"]
        argv += filter_args(self.args)
        argv += filter_args(spec.extra_args)
        argv += fast_mode(spec.service_tier)
        if resume:
            argv += ["resume", resume]
        argv.append("-")
        return argv

    def env(self, spec: RunSpec) -> dict[str, str]:
        """The agent environment without Codex's session markers."""
        return self.strip_markers(spec.env)

    def _spec(self, spec: RunSpec, resume: str) -> ProcessSpec:
        argv = self.argv(spec, resume)
        return ProcessSpec.for_run(spec, argv, self.env(spec), spec.prompt.encode())


def fast_mode(service_tier: str) -> list[str]:
    """The Fast tier needs its feature on (`--enable fast_mode`), as Multica turns it on; the
    other tiers need nothing."""
    return ["--enable", FAST_MODE] if service_tier == FAST_TIER else []


def filter_args(args: Sequence[str]) -> list[str]:
    """Drop a repeated `--json` (clap refuses a flag given twice)."""
    kept = [a for a in args if a not in _RESERVED_FLAGS]
    if len(kept) != len(args):
        log.warning("codex: ignoring --json in the configured arguments (always given)")
    return kept


def codex_home(env: Mapping[str, str]) -> Path:
    """Where the CLI keeps its config and threads: `$CODEX_HOME`, else `~/.codex`."""
    if env.get("CODEX_HOME"):
        return Path(env["CODEX_HOME"])
    return Path(env.get("HOME") or Path.home()) / ".codex"


def configured_model(home: Path, reader: tuple[int, int] | None = None) -> str:
    """The `model` of the CLI's config.toml, for usage reports when none is configured here.

    With an agent user (`reader`) the home is that user's to change between attempts: the
    file is read only through a handle (daemon/boundary/beneath.py), regular, capped and never
    through a link (a FIFO there would hang the attempt's start)."""
    import tomllib  # a run's: not on the way to registering

    try:
        mine = reader is None  # the daemon's own user's home: its links are its own
        with opened_dir(home, follow=mine) as fd:
            text = read_at(fd, "config.toml", _CONFIG_LIMIT, reader, follow=mine).decode("utf-8")
        config: dict[str, Any] = tomllib.loads(text)
    except (OSError, ValueError):
        return "codex-default"
    model = config.get("model")
    return model if isinstance(model, str) and model else "codex-default"
