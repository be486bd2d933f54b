"""The `agent-daemon` command: `run`, `server`, `submit`, `status`, `check`, `disk-usage`."""

from __future__ import annotations

import argparse
import functools
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio

import daemon
from backends.process.child_watch import pidfd_child_watcher
from backends.process.linux import hide_from_agents
from daemon.boundary.agent_user import refuse_root_agents, take_over
from daemon.boundary.pool import AgentPool
from daemon.cli.discovery import available, candidates, detect
from daemon.cli.embedded import own_token, serve_alone, start_embedded
from daemon.collector import settle_collector
from daemon.config import Settings
from daemon.errors import ConfigError, DaemonError
from daemon.logs import configure_logging
from daemon.ops.health import HealthServer
from daemon.ops.metrics import Metrics
from daemon.ops.sdnotify import Notifier
from daemon.protocol.circuit import CircuitBreaker
from daemon.protocol.client import ServerClient, make_http_client
from daemon.services import AgentReach
from daemon.shutdown import ShutdownBudget
from daemon.state.lock import state_dir_lock
from daemon.workdirs.checkout import PATH as CHECKOUT_PATH
from daemon.workdirs.checkout import CheckoutRoute
from daemon.worker.cli_watch import Finder
from daemon.worker.worker import Worker, WorkerOptions

log = logging.getLogger("daemon")

# The other commands' modules are imported by their own command (`_status`, `_submit`, ...):
# `run` registers without them (tests/daemon/test_imports.py).


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the process exit code."""
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env(os.environ)
    except ConfigError as exc:
        print(f"agent-daemon: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        code: int = anyio.run(args.func, settings, args)
    except KeyboardInterrupt:
        return 130
    except DaemonError as exc:
        print(f"agent-daemon: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1
    except BaseExceptionGroup as group:
        # A fatal error raised while starting a task group's member (the health port's lock,
        # the embedded server's address) arrives wrapped; it still deserves its one line.
        fatal = _only_daemon_error(group)
        if fatal is None:
            raise
        print(f"agent-daemon: {fatal}", file=sys.stderr)
        return 1
    return code


def _only_daemon_error(group: BaseExceptionGroup[BaseException]) -> DaemonError | None:
    """The first DaemonError when the group holds nothing else (cancellations aside)."""
    errors, rest = group.split(DaemonError)
    if errors is None:
        return None
    if rest is not None and rest.split(anyio.get_cancelled_exc_class())[1] is not None:
        return None
    first: BaseException = errors
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first if isinstance(first, DaemonError) else None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-daemon", description="Run coding-agent CLIs for a task server."
    )
    parser.add_argument("--version", action="version", version=daemon.__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run the daemon (embedded server if MULTICA_SERVER_URL unset)")
    run.set_defaults(func=_run)
    server = sub.add_parser("server", help="run the embedded reference server alone")
    server.add_argument("--listen", default=None, help="HOST:PORT (default 127.0.0.1:8080)")
    server.set_defaults(func=serve_alone)
    submit = sub.add_parser("submit", help="submit a task to the server")
    submit.add_argument("prompt")
    submit.add_argument("--backend", default=None, help="backend name, e.g. claude or command")
    submit.add_argument(
        "--wait", action="store_true", help="print the transcript, wait for the end"
    )
    submit.add_argument(
        "--repo",
        action="append",
        default=[],
        metavar="URL",
        help="a repository the agent may check out (repeatable; else the workspace's)",
    )
    submit.set_defaults(func=_submit)
    addr_help = "the daemon's health port (default: MULTICA_DAEMON_HEALTH_ADDR)"
    show = sub.add_parser("status", help="show the running daemon and its tasks")
    show.add_argument("--addr", default=None, metavar="HOST:PORT", help=addr_help)
    show.add_argument("--json", action="store_true", help="print the raw /health document")
    show.set_defaults(func=_status)
    probe = sub.add_parser("check", help="exit 0 if the daemon is live and ready, else 1")
    probe.add_argument("--addr", default=None, metavar="HOST:PORT", help=addr_help)
    probe.set_defaults(func=_check)
    usage = sub.add_parser("disk-usage", help="show what task dirs and repo caches take on disk")
    usage.add_argument("--output", choices=("table", "json"), default="table")
    usage.add_argument("--workspaces-root", default=None, help="default: MULTICA_WORKSPACES_ROOT")
    usage.add_argument("--by-workspace", action="store_true", help="one row per workspace")
    usage.add_argument("--top", type=_count, default=0, help="only the N largest rows")
    usage.set_defaults(func=_disk_usage)
    return parser


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("must be a non-negative integer")
    return value


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    """The daemon, holding its state directory: the embedded server if wanted, the worker."""
    # First of all: a refusal leaves no lock, no port, no log behind.
    root_warning = refuse_root_agents(
        settings.agent_identity, embedded=settings.embedded, allowed=settings.agent_allow_root
    )
    # Before any agent exists: they run as our user and could otherwise read our token in
    # /proc/<pid>/environ.
    hide_from_agents()
    # Before anything else: a second daemon on this directory must leave no trace. Before
    # the first spawn: agents are awaited through pidfds, not a thread each.
    with state_dir_lock(settings.state_dir), pidfd_child_watcher():
        for user in settings.agent_pool:
            take_over(user, settings.workspaces_root, settings.state_dir)
        # What a previous run left behind under an agent uid dies before any task gets it.
        await anyio.to_thread.run_sync(AgentPool(settings.agent_pool).sweep_all)
        return await _run_locked(settings, root_warning)


async def _run_locked(settings: Settings, root_warning: str | None = None) -> int:
    metrics = Metrics()
    health = HealthServer(settings.health_addr, metrics, notifier=Notifier.from_env(os.environ))
    async with anyio.create_task_group() as tg:
        # First: the health port is the single-instance lock, and serves `starting` from here.
        health_port = await tg.start(health.serve)
        if root_warning is not None:
            log.warning("%s", root_warning)
        url, token = settings.server_url, settings.token
        embedded = None
        if settings.embedded:
            url, token, embedded = await start_embedded(settings, tg)
        found = await available(settings)
        if not found:
            log.error(
                "no agent backend found: put claude, codex, opencode or gemini on the PATH (or "
                "set MULTICA_<TYPE>_PATH), set MULTICA_COMMAND_PATH, or set "
                "MULTICA_SCRIPTED_BACKEND=1 for the demo backend"
            )
            tg.cancel_scope.cancel()
            return 1
        circuit = CircuitBreaker(metrics=metrics)
        # The embedded server's app answers this daemon's own requests in-process, no socket.
        transport = embedded.transport() if embedded else None
        tasks = settings.max_concurrent_tasks
        async with make_http_client(
            url, token, daemon.__version__, transport=transport, tasks=tasks
        ) as http:
            budget = ShutdownBudget()
            client = ServerClient(http, metrics=metrics, circuit=circuit, budget=budget)
            # A separate server tells us of queued tasks over its control WebSocket; the
            # embedded one in this process tells the worker directly (`subscribe`).
            options = WorkerOptions(
                control=not settings.embedded,
                subreaper=True,
                finder=Finder(
                    functools.partial(candidates, settings),
                    detect,
                    functools.partial(candidates, settings, installed=True),
                ),
            )
            worker = Worker(
                settings,
                client,
                found,
                reach=AgentReach.found(url, os.environ),
                metrics=metrics,
                circuit=circuit,
                budget=budget,
                options=options,
            )
            worker.attach_health(health_port)  # agents get it as MULTICA_DAEMON_PORT
            health.mount(CHECKOUT_PATH, CheckoutRoute(worker.workdirs))
            if embedded:
                embedded.hub.subscribe(worker.pickup)
            health.attach(
                worker.snapshot,
                worker.request_stop,
                token=token,
                lag=worker.runs.transcript_lag,
                stage=lambda: worker.status,
            )
            worker.watch(health.changed)  # registered, running, stopping: shown at once
            settle_collector()  # what exists now lives as long as the daemon
            await worker.run()
        tg.cancel_scope.cancel()
    return 0


async def _submit(settings: Settings, args: argparse.Namespace) -> int:
    """Submit a task to the server (`--wait`: print its transcript until it ends)."""
    from daemon.cli.submit import submit

    return await submit(settings, args)


async def _status(settings: Settings, args: argparse.Namespace) -> int:
    """Print the running daemon's state and tasks (`--json`: the raw /health document)."""
    from daemon.cli.port_owner import expected_owners
    from daemon.cli.status_view import status

    token = await anyio.to_thread.run_sync(own_token, settings)
    owners = expected_owners(settings.state_dir)
    addr = args.addr or settings.health_addr
    return await status(addr, as_json=args.json, token=token, owners=owners)


async def _disk_usage(settings: Settings, args: argparse.Namespace) -> int:
    """Scan the workspaces root (no daemon needed) and print the report."""
    from daemon.cli.disk_usage import disk_usage

    root = Path(args.workspaces_root) if args.workspaces_root else settings.workspaces_root
    return await anyio.to_thread.run_sync(
        functools.partial(
            disk_usage,
            root,
            settings.gc_artifact_patterns,
            sys.stdout,
            as_json=args.output == "json",
            by_workspace=args.by_workspace,
            top=args.top,
        )
    )


async def _check(settings: Settings, args: argparse.Namespace) -> int:
    """Exit 0 when /healthz and /readyz answer 200, else 1; one line either way."""
    from daemon.cli.status_view import check

    return await check(args.addr or settings.health_addr)
