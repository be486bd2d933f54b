"""The README's configuration table and CI's test command stay true to the code."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from daemon.config import env_vars

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_config_table_lists_every_setting_with_its_default() -> None:
    """Each env variable of the settings model appears in the table with its default, in order."""
    table = README.split("<!-- config-table:start -->")[1].split("<!-- config-table:end -->")[0]
    rows = re.findall(r"^\| `([A-Z_]+)` \| (`[^`]*`|—) \|", table, flags=re.MULTILINE)
    expected = [(var, f"`{default}`" if default else "—") for var, default, _ in env_vars()]
    assert rows == expected


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` takes its test command from the README rather than keeping its own copy."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "README.md" in ci and "bash -c" in ci
    assert re.search(
        r"^bash .ci/install-system-deps && python3 -m venv .venv && .*pytest$",
        README,
        flags=re.MULTILINE,
    )
    found = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run"), "--print-command"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert found.stdout.startswith("bash .ci/install-system-deps && python3 -m venv .venv")
    assert found.stdout.rstrip().endswith("pytest")
