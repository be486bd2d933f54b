"""The modules that work in an agent's tree touch files only through daemon/files/beneath.py.

A call that names a place by path (`open`, `Path.read_text`, `shutil.rmtree`, `os.walk`, an
`os.unlink` without `dir_fd`) lets the kernel resolve that path again, through whatever link the
agent planted since: that is how root was sent to copy `/etc/shadow`, delete outside the
workspaces root and hang on a FIFO. This test reads each listed module's syntax tree and
names every such call with its line; a new module that handles agent trees joins the list.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

AGENT_TREE_MODULES = (
    "backends/acp/backend.py",
    "backends/antigravity/backend.py",
    "backends/codex/backend.py",
    "daemon/local_skills/reader.py",
    "daemon/task/run.py",
    "daemon/task/setup/agent_env.py",
    "daemon/task/setup/codex_home.py",
    "daemon/task/setup/runtime_brief/__init__.py",
    "daemon/task/setup/skills.py",
    "daemon/task/setup/spec.py",
    "daemon/task/setup/workspace.py",
    "daemon/workdirs/checkout.py",
    "daemon/workdirs/coauthor.py",
    "daemon/workdirs/disk_usage.py",
    "daemon/workdirs/gc.py",
    "daemon/workdirs/gc_meta.py",
    "daemon/workdirs/leases.py",
    "daemon/workdirs/service.py",
    "daemon/workdirs/sizes.py",
    "daemon/workdirs/worktree.py",
)
"""Modules with a root step in a folder an agent user can write (its task dir, work dir,
Codex home)."""

_BY_PATH_FUNCTIONS = {
    "open": "the builtin open",
    "os.walk": "os.walk",
    "os.scandir": "os.scandir",
    "shutil.rmtree": "shutil.rmtree",
    "shutil.copy": "shutil.copy",
    "shutil.copy2": "shutil.copy2",
    "shutil.copyfile": "shutil.copyfile",
    "shutil.copytree": "shutil.copytree",
    "shutil.move": "shutil.move",
    "tempfile.mkdtemp": "tempfile.mkdtemp",
}
_NEEDS_DIR_FD = {"open", "unlink", "remove", "rmdir", "mkdir", "symlink", "chmod", "chown"}
_BY_PATH_METHODS = {
    "read_text",
    "read_bytes",
    "write_text",
    "write_bytes",
    "iterdir",
    "rglob",
    "glob",
    "unlink",
    "rmdir",
    "mkdir",
    "touch",
    "symlink_to",
    "hardlink_to",
    "chmod",
    "lchmod",
    "open",
}
_MODULES = {"os", "shutil", "tempfile"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def by_path_calls(source: str) -> list[tuple[int, str]]:
    """(line, what) for each call in `source` that reaches a file by path."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if name in _BY_PATH_FUNCTIONS:
            found.append((node.lineno, _BY_PATH_FUNCTIONS[name]))
            continue
        if not isinstance(node.func, ast.Attribute):
            continue
        method, owner = node.func.attr, _dotted(node.func.value)
        if owner == "os":
            if method in _NEEDS_DIR_FD and not any(k.arg == "dir_fd" for k in node.keywords):
                found.append((node.lineno, f"os.{method} without dir_fd"))
        elif owner not in _MODULES and method in _BY_PATH_METHODS:
            found.append((node.lineno, f".{method}() on a path"))
    return sorted(found)


@pytest.mark.parametrize("module", AGENT_TREE_MODULES)
def test_no_root_step_in_an_agent_tree_goes_by_path(module: str) -> None:
    """Every file step of the module goes through directory handles (beneath.py)."""
    found = by_path_calls((ROOT / module).read_text())
    assert not found, "\n".join(f"{module}:{line}: {what}" for line, what in found)


def test_the_rule_names_the_call_and_its_line() -> None:
    """Each kind of by-path call is caught with its line; handle-relative ones pass."""
    source = "\n".join(
        (
            "import os, shutil",
            "open(p)",
            "shutil.rmtree(p)",
            "os.walk(p)",
            "p.read_text()",
            "anyio.Path(p).read_text()",
            "os.unlink(p)",
            "os.unlink(n, dir_fd=fd)",
            "os.open(n, flags, dir_fd=fd)",
            "text.replace('a', 'b')",
        )
    )
    assert by_path_calls(source) == [
        (2, "the builtin open"),
        (3, "shutil.rmtree"),
        (4, "os.walk"),
        (5, ".read_text() on a path"),
        (6, ".read_text() on a path"),
        (7, "os.unlink without dir_fd"),
    ]


def test_every_listed_module_exists() -> None:
    """A module renamed away is not silently dropped from the rule."""
    assert [m for m in AGENT_TREE_MODULES if not (ROOT / m).is_file()] == []
