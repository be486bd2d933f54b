"""Where the end-to-end tests find the real agent CLIs (installed by `npm install --prefix`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from backends import process

REAL_CLI_DIR = Path(__file__).resolve().parent.parent / "real_cli"
INSTALL_HINT = "npm install --prefix tests/real_cli"


def find_cli(name: str, env_var: str) -> str | None:
    """`$env_var` if set, else `tests/real_cli/node_modules/.bin/<name>` if installed."""
    override = os.environ.get(env_var)
    if override:
        return override
    path = REAL_CLI_DIR / "node_modules" / ".bin" / name
    return str(path) if path.exists() else None


def require_cli(name: str, env_var: str) -> str:
    """The CLI's path, or skip the test with a reason that says how to install it."""
    path = find_cli(name, env_var)
    if path is None:
        pytest.skip(f"real {name} CLI not installed: run `{INSTALL_HINT}` (or set ${env_var})")
    return path


def pinned_version(package: str) -> str:
    """The version `tests/real_cli/package.json` pins for an npm package."""
    manifest = json.loads((REAL_CLI_DIR / "package.json").read_text())
    return str(manifest["dependencies"][package])


def tree_of(pid: int) -> list[process.ProcIdentity]:
    """The process and all its descendants, as pid + start-time identities."""
    leader = process.identify(pid)
    return ([leader] if leader else []) + process.descendants(pid)
