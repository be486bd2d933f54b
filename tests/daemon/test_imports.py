"""What the daemon's entry point loads: the embedded server's libraries only where it runs,
httpx's command-line client nowhere; and no module of the daemon imports itself back.

Each import costs memory for the daemon's whole life: uvicorn, starlette, SQLite and the
server's own modules cost a daemon that talks to a remote server about 4 MB it never uses.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import ROOT

SERVER_ONLY = ("uvicorn", "starlette", "sqlite3", "daemon.server.serve", "daemon.server.app")


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
