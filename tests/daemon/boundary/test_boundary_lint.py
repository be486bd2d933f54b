"""The modules that work in an agent's tree touch files only through daemon/boundary/beneath.py.

A call that names a place by path (`open`, `Path.read_text`, `shutil.rmtree`, `os.walk`, an
`os.unlink` or `os.rename` without its `dir_fd`s, `os.listdir` of a path, a stat by path such
as `Path.exists`, `is_symlink` or `resolve`) lets the kernel resolve that path again, through
whatever link the agent planted since: that is how root was sent to copy `/etc/shadow`, delete
outside the workspaces root, hang on a FIFO and read rollouts through a swapped Codex sessions
link. So does a subprocess started in a folder of the agent's (its working directory is
resolved by the child), and a handle opened with `follow=True`. This test reads each listed
module's syntax tree and names every such call with its line; a new module that handles agent
trees joins the list. A call that must stay is in `ALLOWED`, with the reason it is safe.
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
    "backends/codex/rollouts.py",
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
    "daemon/workdirs/git.py",
    "daemon/task/session_pin.py",
    "backends/claude/backend.py",
    "daemon/task/localdir/brief_block.py",
    "daemon/task/localdir/hold.py",
    "daemon/task/localdir/place.py",
    "daemon/task/localdir/resource.py",
    "daemon/task/localdir/sidecars.py",
    "daemon/task/localdir/untracked.py",
    "daemon/task/localdir/worktree.py",
)
"""Modules with a root step in a folder an agent user can write (its task dir, work dir,
Codex home, a folder handed to it, a project's local directory and its worktree)."""

_REUSE = (
    "Go's reuse rule resolves the claim's prior work dir; these only decide whether to reuse it "
    "(it must be `<root>/<ws>/<task>/workdir`, the run's uid's, both markers read through "
    "handles), and every step into it afterwards goes through handles from the workspace "
    "folder, which refuse a link"
)
_USERS_GIT = (
    "what kind of checkout a path holds: with an agent user every act on it is that user's git "
    "(`acting_as`), so a swapped link misleads only what the user's own git then tries with its "
    "own rights; without one, agents are the daemon's own user"
)
_OPERATORS_ROOT = (
    "the workspaces root is the operator's path (a link they made is followed), whose parents "
    "start-up checks no agent can write; nothing below it is resolved this way"
)
_LOCAL_CHECK = (
    "a project's local directory is named by its user, and resolved only to decide whether and "
    "where it may be worked in (Go's checks): every read and write in it afterwards walks down "
    "from `/` along the real path through handles (`opened_real`), so a link put there since "
    "stops the walk (ELOOP) instead of sending it elsewhere"
)
_WORKTREE_SLOT = (
    "whether anything (a link too, not followed) holds the worktree's name in the task's own "
    "folder: only whether to ask git to remove it; nothing is opened, read or written"
)
ALLOWED: dict[tuple[str, str], str] = {
    ("daemon/task/setup/workspace.py", "prepare_dirs: root.resolve()"): _OPERATORS_ROOT,
    (
        "daemon/task/setup/workspace.py",
        "reusable_work_dir: root.resolve(strict=True)",
    ): _OPERATORS_ROOT,
    (
        "daemon/task/setup/workspace.py",
        "reusable_work_dir: Path(task.prior_work_dir).resolve(strict=True)",
    ): _REUSE,
    ("daemon/task/setup/workspace.py", "reusable_work_dir: work.is_dir()"): _REUSE,
    ("daemon/task/setup/workspace.py", "reusable_work_dir: work.stat()"): _REUSE,
    ("daemon/task/setup/workspace.py", "reusable_work_dir: work.parent.stat()"): _REUSE,
    ("daemon/workdirs/checkout.py", "_inside: root.resolve(strict=True)"): _USERS_GIT,
    ("daemon/workdirs/checkout.py", "_inside: Path(requested).resolve(strict=True)"): _USERS_GIT,
    ("daemon/workdirs/checkout.py", "_inside: real.is_dir()"): _USERS_GIT,
    ("daemon/workdirs/worktree.py", "check_out: path.is_symlink()"): _USERS_GIT,
    ("daemon/workdirs/worktree.py", "check_out: path.exists()"): _USERS_GIT,
    ("daemon/workdirs/worktree.py", "check_out: dot_git.is_file()"): _USERS_GIT,
    ("daemon/workdirs/worktree.py", "check_out: dot_git.is_dir()"): _USERS_GIT,
    ("daemon/workdirs/worktree.py", "check_out: dot_git.is_symlink()"): _USERS_GIT,
    ("daemon/workdirs/worktree.py", "_same_cache: common.resolve()"): _USERS_GIT,
    ("daemon/workdirs/worktree.py", "_same_cache: bare.resolve()"): _USERS_GIT,
    ("daemon/workdirs/git.py", "_start: subprocess.Popen("): (
        "git's working directory: a checkout in an agent's tree only as that agent's user "
        "(`acting_as`), otherwise the daemon's own caches under `.repos/`"
    ),
    ("daemon/workdirs/gc.py", "_orphan: task_dir.stat()"): (
        "the mtime of a task's folder, whose name sits in the workspace folder (root's, 0711): "
        "no agent can make it a link, and nothing of it is read"
    ),
    ("daemon/workdirs/sizes.py", "subdirs: opened_dir(directory, follow=True)"): (
        "`subdirs` lists the daemon's own folders only (the root, which may be the operator's "
        "link, a workspace folder, the caches), never a task's folder"
    ),
    ("backends/codex/rollouts.py", 'opened_sessions: opened_dir(home / "sessions", follow=True)'): (
        "only without an agent user (`reader` None): every link is then the daemon's own user's"
    ),
    **{
        ("daemon/task/localdir/resource.py", call): _LOCAL_CHECK
        for call in (
            "check_path: path.stat()",
            "check_path: os.path.realpath(path)",
            "_protected: os.path.realpath(banned)",
            "_protected: os.path.realpath(home)",
            "_real: os.path.realpath(path, strict=True)",
        )
    },
    ("daemon/task/localdir/place.py", "prepare_local: os.path.realpath(work)"): _LOCAL_CHECK,
    (
        "daemon/task/localdir/place.py",
        "_same_folder: os.path.samefile(task.prior_work_dir, local.path)",
    ): (
        "only whether the claim's session ran in this very folder (so it may be resumed): two "
        "stats, nothing opened or written"
    ),
    (
        "daemon/task/localdir/worktree.py",
        'make_worktree: os.path.realpath(git.run(["rev-parse", "--show-toplevel"], cwd=folder))',
    ): _LOCAL_CHECK,
    ("daemon/task/localdir/worktree.py", "make_worktree: os.path.lexists(path)"): _WORKTREE_SLOT,
    ("daemon/task/localdir/worktree.py", "_remove: os.path.lexists(path)"): _WORKTREE_SLOT,
}
"""(module, "function: the call's first line as written") → why that call may go by path."""

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
    "os.path.exists": "os.path.exists",
    "os.path.lexists": "os.path.lexists",
    "os.path.isdir": "os.path.isdir",
    "os.path.isfile": "os.path.isfile",
    "os.path.islink": "os.path.islink",
    "os.path.realpath": "os.path.realpath",
    "os.path.getsize": "os.path.getsize",
    "os.lstat": "os.lstat",
}
_NEEDS_DIR_FD = {
    *("open", "unlink", "remove", "rmdir", "mkdir", "symlink", "chmod", "chown", "stat"),
    *("readlink", "access", "utime", "mkfifo", "mknod"),
}
_NEEDS_BOTH_DIR_FDS = {"rename", "replace", "link"}
"""Two paths each: both resolved relative to handles (`src_dir_fd` and `dst_dir_fd`)."""
_SUBPROCESS = {
    *("subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_call"),
    *("subprocess.check_output", "anyio.run_process", "anyio.open_process"),
}
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
    "exists",
    "is_file",
    "is_dir",
    "is_symlink",
    "resolve",
    "stat",
    "lstat",
    "readlink",
    "rename",
    "samefile",
}
# Not `replace`: `str.replace` is everywhere and looks the same; `os.replace` is checked.
_MODULES = {"os", "shutil", "tempfile"}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def by_path_calls(source: str) -> list[tuple[int, str]]:
    """(line, what) for each call in `source` that reaches a file by path."""
    return [(line, what) for line, what, _ in findings(source)]


def findings(source: str) -> list[tuple[int, str, str]]:
    """(line, what, where) for each by-path call in `source`: `where` is the function it is in
    and the call's first line as written (`_same_cache: common.resolve()`)."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name
        if isinstance(node, ast.Call) and (what := _by_path(node)):
            code = (ast.get_source_segment(source, node) or "").splitlines()[0].strip()
            found.append((node.lineno, what, f"{function}: {code}"))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "<module>")
    return sorted(found)


def _by_path(node: ast.Call) -> str:
    """What reaches a file by path in this call, or ""."""
    name = _dotted(node.func)
    keywords = {k.arg for k in node.keywords}
    if any(k.arg == "follow" and _is_true(k.value) for k in node.keywords):
        return "a link followed (follow=True)"
    if name in _BY_PATH_FUNCTIONS:
        return _BY_PATH_FUNCTIONS[name]
    if name in _SUBPROCESS:
        # The child resolves its working directory itself: a folder an agent swapped for a
        # link sends root's git (or anything) elsewhere. "/" is the one cwd that is safe.
        cwd = next((k.value for k in node.keywords if k.arg == "cwd"), None)
        if cwd is not None and not (isinstance(cwd, ast.Constant) and cwd.value == "/"):
            return f"{name} with a cwd"
        return ""
    if name == "os.listdir":
        # `os.listdir(fd)` lists an open handle; any other argument is a path.
        if not node.args or not _names_a_handle(node.args[0]):
            return "os.listdir of a path"
        return ""
    if not isinstance(node.func, ast.Attribute):
        return ""
    method, owner = node.func.attr, _dotted(node.func.value)
    if owner == "os":
        if method in _NEEDS_DIR_FD and "dir_fd" not in keywords:
            return f"os.{method} without dir_fd"
        if method in _NEEDS_BOTH_DIR_FDS and not {"src_dir_fd", "dst_dir_fd"} <= keywords:
            return f"os.{method} without src_dir_fd and dst_dir_fd"
        return ""
    if owner not in _MODULES and method in _BY_PATH_METHODS:
        return f".{method}() on a path"
    return ""


def _is_true(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is True


def _names_a_handle(node: ast.expr) -> bool:
    """A name that says it holds a descriptor (`fd`, `dir_fd`, `home_fd`, ...)."""
    name = _dotted(node).rsplit(".", 1)[-1]
    return name == "fd" or name.endswith("_fd")


@pytest.mark.parametrize("module", AGENT_TREE_MODULES)
def test_no_root_step_in_an_agent_tree_goes_by_path(module: str) -> None:
    """Every file step of the module goes through directory handles (beneath.py), but for
    the calls `ALLOWED` says why."""
    found = [f for f in findings((ROOT / module).read_text()) if (module, f[2]) not in ALLOWED]
    assert not found, "\n".join(f"{module}:{line}: {what}: {code}" for line, what, code in found)


def test_every_allowed_call_is_still_there() -> None:
    """An allowance whose call is gone (fixed, or renamed) goes too: none waits for a new one."""
    present = {
        (module, where)
        for module in AGENT_TREE_MODULES
        for _, _, where in findings((ROOT / module).read_text())
    }
    assert sorted(set(ALLOWED) - present) == []


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
            "os.rename(a, b)",
            "os.replace(a, b, src_dir_fd=fd, dst_dir_fd=fd)",
            "os.link(a, b, src_dir_fd=fd)",
            "os.listdir(path)",
            "os.listdir(home_fd)",
            "p.exists() or p.is_symlink() or p.resolve()",
            "os.path.realpath(p)",
            "os.stat(p)",
            "subprocess.run(argv, cwd=work)",
            "subprocess.run(argv, cwd='/')",
            "opened_dir(p, follow=True)",
        )
    )
    assert by_path_calls(source) == [
        (2, "the builtin open"),
        (3, "shutil.rmtree"),
        (4, "os.walk"),
        (5, ".read_text() on a path"),
        (6, ".read_text() on a path"),
        (7, "os.unlink without dir_fd"),
        (11, "os.rename without src_dir_fd and dst_dir_fd"),
        (13, "os.link without src_dir_fd and dst_dir_fd"),
        (14, "os.listdir of a path"),
        (16, ".exists() on a path"),
        (16, ".is_symlink() on a path"),
        (16, ".resolve() on a path"),
        (17, "os.path.realpath"),
        (18, "os.stat without dir_fd"),
        (19, "subprocess.run with a cwd"),
        (21, "a link followed (follow=True)"),
    ]


def test_every_listed_module_exists() -> None:
    """A module renamed away is not silently dropped from the rule."""
    assert [m for m in AGENT_TREE_MODULES if not (ROOT / m).is_file()] == []
