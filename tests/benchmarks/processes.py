"""Real `agent-daemon run` / `agent-daemon server` processes for the benchmarks that need them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import anyio
import anyio.abc
import httpx

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "bench-server-token"
"""The servers' bearer token: every benchmark process is given it (MULTICA_DAEMON_TOKEN)."""
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def free_port() -> int:
    """A loopback port free right now (the child binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def base_env(home: Path, **overrides: str) -> dict[str, str]:
    """A daemon environment in `home` with the default intervals and the scripted backend."""
    env = {
        "HOME": str(home),
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.environ.get("BENCH_PYTHONPATH", str(ROOT)),
        "MULTICA_DAEMON_STATE_DIR": str(home / "state"),
        "MULTICA_DAEMON_TOKEN": TOKEN,
        "MULTICA_WORKSPACES_ROOT": str(home / "workspaces"),
        "MULTICA_SCRIPTED_BACKEND": "1",
        "MULTICA_CLAUDE_PATH": str(home / "no-claude"),
        "MULTICA_CODEX_PATH": str(home / "no-codex"),
        "MULTICA_DAEMON_HEALTH_ADDR": f"127.0.0.1:{free_port()}",
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
        # A benchmark run as root measures agents as root against its own fake server.
        "MULTICA_AGENT_ALLOW_ROOT": "1",
    }
    env.update(overrides)
    return env


@contextmanager
def running(env: dict[str, str], *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m daemon ARGS` until the block ends, then SIGTERM (and wait for the exit)."""
    proc = subprocess.Popen([sys.executable, "-m", "daemon", *args], env=env, cwd=env["HOME"])
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def running_async(
    env: dict[str, str], log: Path, *args: str, argv: list[str] | None = None
) -> AsyncIterator[anyio.abc.Process]:
    """`python -m daemon ARGS` (default `run`; or `argv`, another daemon) beside an event loop
    that serves its server: its log to `log`, SIGTERM at the end and its exit awaited without
    blocking the loop."""
    with log.open("wb") as sink:
        process = await anyio.open_process(
            argv or [sys.executable, "-m", "daemon", *(args or ("run",))],
            env=env,
            cwd=env["HOME"],
            stdout=sink,
            stderr=sink,
        )
        try:
            yield process
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:  # not killed already (a crash staged)
                    process.send_signal(signal.SIGTERM)
                with anyio.move_on_after(30):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()


def server_client(url: str, timeout: float = 30.0) -> httpx.Client:
    """A client of the server at `url` that sends the token."""
    return httpx.Client(base_url=url, headers=AUTH, timeout=timeout)


def wait_until_up(url: str, path: str, within: float = 30.0) -> None:
    """Wait until `url + path` answers 200."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + path, headers=AUTH, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"{url}{path} did not come up within {within:.0f}s")


def wait_for_runtime(url: str, within: float = 30.0) -> None:
    """Wait until a daemon has registered a runtime with the server at `url`."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/api/runtimes", headers=AUTH, timeout=1).json():
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.1)
    raise SystemExit(f"no daemon registered with {url} within {within:.0f}s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far."""
    return sum(cpu_split(pid))


def cpu_split(pid: int) -> tuple[float, float]:
    """User and system CPU time of the process so far, apart."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


class RssSampler:
    """The process's resident memory (MB), read from /proc every half second."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[float] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            for field in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if field.startswith("VmRSS:"):
                    self.samples.append(int(field.split()[1]) / 1024)
            if self._done.wait(0.5):
                return
