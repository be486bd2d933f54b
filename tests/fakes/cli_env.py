"""The environment a real agent CLI runs with against a fake model API: what every such CLI
gets, its own variables on top, the test's last."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

PLAIN_PATH = "/usr/local/bin:/usr/bin:/bin"


def cli_env(home: Path, extra: Mapping[str, str], **own: str) -> dict[str, str]:
    """A plain PATH, `home` as HOME and a UTF-8 locale; then the CLI's `own` variables, then
    the test's `extra` (which may replace any of them)."""
    return {"PATH": PLAIN_PATH, "HOME": str(home), "LANG": "C.UTF-8", **own, **extra}
