"""What the daemon's entry point loads: the embedded server's libraries only where it runs,
the task machinery only once a task starts, httpx's command-line client nowhere; and no module
of the daemon imports itself back.

Each import costs memory for the daemon's whole life: uvicorn, starlette, SQLite and the
server's own modules cost a daemon that talks to a remote server about 4 MB it never uses. And
each costs time before the first register and claim: the task machinery (a run, its setup,
MCP, local directories, the backends' run paths) and the other commands' modules took some
30 ms of it (docs/benchmarks.md, Start-up).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from backends.scripted import Script
from daemon.testing.waits import wait_for
from tests.fakes.multica_server import multica_server
from tests.helpers import ROOT, daemon_env, daemon_process

SERVER_ONLY = ("uvicorn", "starlette", "sqlite3", "daemon.server.serve", "daemon.server.app")
BEFORE_A_TASK = {
    "daemon.task",
    "daemon.task.background",
    "daemon.task.localdir",
    "daemon.task.localdir.locks",
    "daemon.task.progress",
    "daemon.task.recovery",
    "daemon.task.setup",
    "daemon.task.setup.skill_cache",
    "daemon.task.setup.skill_manifest",
}
"""The task package's small parts the worker's services hold before any task: the rest of
`daemon.task` is the task machinery."""
RUN_PATHS = ("backends.acp.session", "backends.codex.appserver", "backends.codex.events", "tomllib")
"""The largest of the backends' run paths: a run's parsers, not needed to detect a CLI."""
OTHER_COMMANDS = ("daemon.cli.submit", "daemon.cli.status_view", "daemon.cli.disk_usage")
CLI_BACKENDS = {
    *(f"backends.{cli}.backend" for cli in ("claude", "codex", "pi", "qwen", "copilot", "acp")),
    *(f"backends.{cli}.backend" for cli in ("cursor", "codebuddy", "openclaw", "antigravity")),
    *(f"backends.{cli}.backend" for cli in ("deveco", "dsh", "omp")),
}
"""The modules of the named CLIs' backends."""
ABSENT_CLIS = tuple(f"backends.{cli}.backend" for cli in ("antigravity", "deveco", "dsh", "acp"))
"""Backends of CLIs the test machine does not have: start-up does not import them."""


def _loaded_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    script = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(json.loads(done.stdout))


def _server_modules(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m in SERVER_ONLY or m.split(".")[0] in SERVER_ONLY)


def test_the_daemon_and_submit_load_none_of_the_servers_libraries() -> None:
    loaded = _loaded_after("import daemon.cli.main, daemon.cli.submit")
    assert "daemon.server.token" in loaded  # the token file is read without the server
    assert _server_modules(loaded) == []


def _task_machinery(modules: set[str] | list[str]) -> list[str]:
    task = ("daemon", "task")
    return sorted(m for m in modules if tuple(m.split(".")[:2]) == task and m not in BEFORE_A_TASK)


def test_the_daemon_registers_and_claims_without_the_task_machinery() -> None:
    """The `run` command imports neither the task machinery nor the other commands' modules:
    the daemon imports the machinery once up (`Runs.load`), each command its own modules."""
    loaded = _loaded_after("import daemon.cli.main")
    assert "daemon.worker.worker" in loaded
    assert _task_machinery(loaded) == []
    assert sorted(loaded.intersection(OTHER_COMMANDS)) == []


def test_detecting_the_clis_leaves_out_their_runs() -> None:
    """Every backend the settings make possible, built to be asked for its version as
    start-up does, brings none of the largest run paths: the first run imports its own."""
    loaded = _loaded_after(
        "from daemon.cli.discovery import candidates\n"
        "from daemon.config import Settings\n"
        "found = candidates(Settings.from_env({'HOME': '/nonexistent', 'MULTICA_SERVER_URL': "
        "'http://127.0.0.1:9'}))\n"
        "assert {'codex', 'opencode'} <= {b.name for b in found}"
    )
    assert "backends.codex.backend" in loaded
    assert sorted(loaded.intersection(RUN_PATHS)) == []


def test_only_the_backends_of_installed_clis_are_imported_to_detect_them() -> None:
    """With no CLI on the PATH, the candidates start-up asks import no backend of a named
    CLI; the full list, which the later checks for new CLIs read, imports them all."""
    build = (
        "from daemon.cli.discovery import candidates\n"
        "from daemon.config import Settings\n"
        "settings = Settings.from_env({'HOME': '/nonexistent', 'PATH': '/nonexistent', "
        "'MULTICA_SERVER_URL': 'http://127.0.0.1:9'})\n"
        "import os; os.environ['PATH'] = '/nonexistent'\n"
    )
    asked = _loaded_after(build + "assert candidates(settings, installed=True) == []")
    assert sorted(asked.intersection(CLI_BACKENDS)) == []
    assert "backends.acp.discovery" not in asked  # a catalog's handshake: Grok's models only
    everyone = _loaded_after(build + "candidates(settings)")
    assert everyone >= CLI_BACKENDS


def test_the_task_machinery_is_told_apart() -> None:
    """The check names the machinery a run imports and passes what the worker holds."""
    loaded = _loaded_after("import daemon.task.run")
    assert {"daemon.task.run", "daemon.task.attempt"} <= set(_task_machinery(loaded))
    assert _task_machinery(BEFORE_A_TASK | {"daemon.taskless", "daemon.worker.runs"}) == []


def test_the_daemon_leaves_out_httpx_command_line_client() -> None:
    """httpx's own CLI (click, pygments) stays out although click is installed for uvicorn."""
    loaded = _loaded_after("import daemon.cli.main, httpx; assert callable(httpx.main)")
    assert "click" not in loaded
    assert "pygments" not in loaded


def _imports(path: Path, module: str, known: set[str]) -> set[str]:
    """The project's modules `module` (at `path`) imports outside its functions, those under
    `if TYPE_CHECKING:` included: a circle drawn only for the type checker is still a circle."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    body = ast.parse(path.read_text(encoding="utf-8")).body
    statements = list(body)
    while statements:
        node = statements.pop()
        if isinstance(node, ast.If | ast.Try):
            statements += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:  # `from pkg import module` imports that module only
                name = f"{base}.{alias.name}"
                found.add(name if name in known else base)
    return {name for name in found if name in known and name != module}


def _circles(root: Path, packages: tuple[str, ...]) -> list[list[str]]:
    """Every group of modules that import one another round a circle (Tarjan's components)."""
    paths = {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for package in packages
        for p in (root / package).rglob("*.py")
    }
    edges = {m: _imports(p, m, set(paths)) for m, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in edges[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while (member := stack.pop()) != module:
                group.append(member)
            if group:
                circles.append(sorted([module, *group]))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    return circles


def test_no_modules_import_each_other_round_a_circle() -> None:
    """Dependencies point one way: no module of daemon/ or backends/ reaches itself again
    through its imports."""
    assert _circles(ROOT, ("daemon", "backends")) == []


def test_a_circle_is_found(tmp_path: Path) -> None:
    """The check sees a circle drawn through a TYPE_CHECKING import, as gc.py and repo_gc.py
    had one."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import B\nclass A: ...\n")
    typed_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\n"
    (package / "b.py").write_text(typed_only + "class B: ...\n")
    (package / "c.py").write_text("from . import a\n")
    assert _circles(tmp_path, ("pkg",)) == [["pkg.a", "pkg.b"]]


@pytest.mark.anyio
async def test_a_daemon_serving_a_remote_server_never_loads_the_servers_libraries(
    tmp_path: Path,
) -> None:
    """Up, registered, a task run and reported against the Multica-faithful server, stopped:
    no module of the embedded server was imported on the way (`-X importtime` lists each),
    and the task machinery only after the daemon had registered (its `started:` line)."""
    log = tmp_path / "daemon.log"
    python = (sys.executable, "-X", "importtime")
    script = Script().text("hi").result("done").dumps()
    async with (
        multica_server() as fake,
        daemon_process(daemon_env(tmp_path, fake.url), log=log, python=python) as run,
    ):
        task_id = fake.queue_comment(script)
        assert (await fake.finished(task_id, within=30)).status == "completed"
        run.terminate()
        await run.wait()
    lines = log.read_text().splitlines()
    started = next(n for n, line in enumerate(lines) if " started: " in line)
    imported = [
        line.split("|")[2].strip()
        for line in lines
        if line.startswith("import time:") and "|" in line
    ]
    before_start = [
        line.split("|")[2].strip()
        for line in lines[:started]
        if line.startswith("import time:") and "|" in line
    ]
    assert "daemon.task.run" in imported  # the whole run was seen
    assert _server_modules(set(imported)) == []
    assert _task_machinery(before_start) == []
    assert sorted(set(before_start).intersection(RUN_PATHS)) == []
    assert sorted(set(before_start).intersection(ABSENT_CLIS)) == []


def _imported(lines: list[str]) -> list[str]:
    return [line.split("|")[2].strip() for line in lines if line.startswith("import time:")]


@pytest.mark.anyio
async def test_an_idle_daemon_loads_the_task_machinery_once_it_is_up(tmp_path: Path) -> None:
    """With no task to claim, the daemon still imports the task machinery once it has
    registered: a broken or half-upgraded install shows at start-up, not at the first task."""
    log = tmp_path / "daemon.log"
    python = (sys.executable, "-X", "importtime")
    async with (
        multica_server() as fake,
        daemon_process(daemon_env(tmp_path, fake.url), log=log, python=python) as run,
    ):
        loaded = lambda: "daemon.task.run" in _imported(log.read_text().splitlines())  # noqa: E731
        await wait_for(loaded, what="the import of daemon.task.run", within=30)
        assert fake.tasks == {}  # nothing was claimed: no run imported it
        run.terminate()
        await run.wait()
    lines = log.read_text().splitlines()
    started = next(n for n, line in enumerate(lines) if " started: " in line)
    assert "daemon.task.run" in _imported(lines[started:])
