"""Where the end-to-end tests find the real agent CLIs (installed by `npm install --prefix`).

Claude Code and Codex are installed twice, the version npm serves now under the package's own
name and the one pinned before it under an npm alias (`claude-code-pinned-old`): a CLI upgrade
that changes the output is then seen by the tests beside the version that still works. `Pin`
names one such install; the `claude_cli` / `codex_cli` fixtures run a test on each.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from backends import process

REAL_CLI_DIR = Path(__file__).resolve().parent.parent / "real_cli"
INSTALL_HINT = "npm install --prefix tests/real_cli; bash tests/real_cli/install-extra"


NPM_PREFIXES = (".", "openclaw", "node24")
"""The npm installs under tests/real_cli: the main one, and install-extra's."""
PYPI_EXECUTABLES = {"grok": "grok_cli_bin/bin/grok"}
"""CLIs PyPI serves inside a package rather than as a script: the path in site-packages."""


def find_cli(name: str, env_var: str) -> str | None:
    """`$env_var` if set, else the CLI installed from npm (`tests/real_cli/node_modules/.bin`,
    or the prefixes of install-extra: `openclaw/`, `node24/`) or PyPI
    (`tests/real_cli/venv/<name>/bin`), if it is."""
    override = os.environ.get(env_var)
    if override:
        return override
    npm = [REAL_CLI_DIR / prefix / "node_modules" / ".bin" / name for prefix in NPM_PREFIXES]
    for path in (*npm, REAL_CLI_DIR / "venv" / name / "bin" / name):
        if path.exists():
            return str(path)
    # A wheel that ships the executable as package data (`grok-cli-bin`) puts it there.
    inside = PYPI_EXECUTABLES.get(name)
    venv = REAL_CLI_DIR / "venv" / name / "lib"
    found = sorted(venv.glob(f"python*/site-packages/{inside}")) if inside else []
    return str(found[0]) if found else None


def require_cli(name: str, env_var: str) -> str:
    """The CLI's path, or skip the test with a reason that says how to install it."""
    path = find_cli(name, env_var)
    if path is None:
        pytest.skip(f"real {name} CLI not installed: run `{INSTALL_HINT}` (or set ${env_var})")
    return path


def pinned_version(package: str) -> str:
    """The version `tests/real_cli/package.json` pins for an npm package (or an alias of one:
    `npm:@openai/codex@0.169.0` pins 0.169.0)."""
    manifest = json.loads((REAL_CLI_DIR / "package.json").read_text())
    return str(manifest["dependencies"][package]).rpartition("@")[2]


@dataclass(frozen=True, slots=True)
class Pin:
    """One installed version of an agent CLI: `package` is the name it is installed under
    (the real one, or an alias for an older pin), `env_var` points the tests at another copy."""

    cli: str
    package: str
    env_var: str

    @property
    def version(self) -> str:
        return pinned_version(self.package)

    @property
    def id(self) -> str:
        """The test id part naming this pin: `claude-2.1.332`."""
        return f"{self.cli}-{self.version}"

    def require(self) -> InstalledCli:
        """The installed CLI, or skip the test with a reason that says how to install it."""
        override = os.environ.get(self.env_var)
        path = override or self._installed()
        if path is None:
            pytest.skip(
                f"real {self.cli} {self.version} not installed: run `{INSTALL_HINT}` "
                f"(or set ${self.env_var})"
            )
        return InstalledCli(path, self.version)

    def _installed(self) -> str | None:
        """The executable the package's manifest names for the CLI, if it is installed."""
        root = REAL_CLI_DIR / "node_modules" / self.package
        try:
            manifest = json.loads((root / "package.json").read_text())
        except OSError:
            return None
        path = root / manifest["bin"][self.cli]
        return str(path) if path.exists() else None


@dataclass(frozen=True, slots=True)
class InstalledCli:
    """A CLI's executable and the version package.json pins for it."""

    path: str
    version: str


CLAUDE_PINS = (
    Pin("claude", "@anthropic-ai/claude-code", "MULTICA_TEST_CLAUDE_PATH"),
    Pin("claude", "claude-code-pinned-old", "MULTICA_TEST_CLAUDE_OLD_PATH"),
)
CODEX_PINS = (
    Pin("codex", "@openai/codex", "MULTICA_TEST_CODEX_PATH"),
    Pin("codex", "codex-pinned-old", "MULTICA_TEST_CODEX_OLD_PATH"),
)
"""The newest pin first: the one `tested_max` names, and the one every scenario runs on."""


def pin_id(pin: Pin) -> str:
    return pin.id


# Every real-CLI test runs on the newest pin (the `claude_cli` / `codex_cli` fixtures); these
# run one on the older pin as well. Not all of them: twice every test cost about a minute of
# the suite's wall time, so the older pin runs the scenarios that show a CLI still fits (its
# version, an answer, a tool longer than the idle window, a stall after the first event and
# after a tool, the parser knowing every event of a tool round trip).
ON_EVERY_CLAUDE_PIN = pytest.mark.parametrize("claude_cli", CLAUDE_PINS, ids=pin_id, indirect=True)
ON_EVERY_CODEX_PIN = pytest.mark.parametrize("codex_cli", CODEX_PINS, ids=pin_id, indirect=True)


def tree_of(pid: int) -> list[process.ProcIdentity]:
    """The process and all its descendants, as pid + start-time identities."""
    leader = process.identify(pid)
    return ([leader] if leader else []) + process.descendants(pid)
