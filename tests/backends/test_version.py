"""The bounded `--version` probe, on real `sys.executable -c` children."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from backends.version import cli_version, parse_version, version_at_least
from daemon.testing import python

pytestmark = pytest.mark.anyio

ENV = {"LC_ALL": "C.UTF-8"}


def test_version_is_picked_out_of_the_line() -> None:
    """The dotted version is taken from what the CLIs actually print."""
    assert parse_version("2.1.328 (Claude Code)") == "2.1.328"
    assert parse_version("codex-cli 0.169.0") == "0.169.0"
    assert parse_version("tool 1.2.3-beta.1") == "1.2.3-beta.1"
    assert parse_version("no digits here") == "no digits here"


async def test_answering_cli_gives_its_version_line() -> None:
    """A CLI that prints a version and exits 0 is detected with its version line, whole, as
    Multica's daemon registers it (`2.1.328 (Claude Code)`); noise before it is skipped."""
    code = "print(); print('Active code page: 65001'); print('4.5.6 (Tool)'); print('x 7.8.9')"
    assert await cli_version(python(code), ENV) == "4.5.6 (Tool)"
    assert await cli_version(python("print('nightly')"), ENV) == "nightly"


def test_a_version_line_is_ordered_by_its_version() -> None:
    """The minimum-version check reads the version out of the line, wherever it stands."""
    assert version_at_least("codex-cli 0.169.0", "0.100.0")
    assert not version_at_least("codex-cli 0.99.0", "0.100.0")
    assert not version_at_least("1.9.0 (Claude Code)", "2.0.0")


async def test_cli_printing_its_version_on_stderr_gives_it() -> None:
    """A CLI that prints its version on stderr only (Pi does) is detected with it; stderr
    without a version is no answer."""
    script = "import sys; sys.stderr.write('0.73.1\\n')"
    assert await cli_version(python(script), ENV) == "0.73.1"
    assert await cli_version(python("import sys; sys.stderr.write('oops\\n')"), ENV) is None


async def test_failing_cli_is_not_detected() -> None:
    """A CLI that exits non-zero is not available, whatever it printed."""
    assert await cli_version(python("print('1.0.0'); raise SystemExit(3)"), ENV) is None


async def test_missing_cli_is_not_detected(tmp_path: Path) -> None:
    """A path that does not exist is simply not available."""
    assert await cli_version([str(tmp_path / "nope"), "--version"], ENV) is None


async def test_wedged_cli_is_given_up_within_the_bound(tmp_path: Path) -> None:
    """A CLI that never answers costs the bound, not more, and is killed."""
    pidfile = tmp_path / "pid"
    code = f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    started = time.monotonic()
    assert await cli_version(python(code), ENV, bound=3.0) is None
    assert time.monotonic() - started < 8
    pid = int(await anyio.Path(pidfile).read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_version_order_is_numeric_and_forgiving() -> None:
    """Releases compare part by part as numbers; a suffix or an unreadable version passes."""
    assert version_at_least("1.18.10", "1.18.9")
    assert not version_at_least("1.18.2", "1.18.10")
    assert version_at_least("0.61.0", "0.61")
    assert not version_at_least("0.60.9-nightly.1", "0.61.0")
    assert version_at_least("v2.0.0", "2.0.0")
    assert version_at_least("/usr/bin/agent", "1.0.0")
    assert version_at_least("1.0.0", "")
