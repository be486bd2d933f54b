"""Cursor Agent's catalog from a stand-in `cursor-agent` printing `--list-models` in the
CLI's documented format; Multica's stand-in list when it lists nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.cursor import CursorBackend
from tests.fakes.agent_cli import runs_of, write_cli

pytestmark = pytest.mark.anyio

LISTING = (
    "Available models",
    "",
    "auto - Auto",
    "composer-2-fast - Composer 2 Fast (current, default)",
    "claude-4.6-sonnet-medium - Claude 4.6 Sonnet",
    "gpt-5.5 - GPT-5.5 (new)",
    "auto - Auto again",
    "│ boxed - Not a model",
    "Tip: use --model <id> - to pick one",
)


async def test_the_catalog_is_the_id_label_rows_with_cursors_default(tmp_path: Path) -> None:
    """Each `id - label` row once (header, decoration and prose left out), provider `cursor`,
    the row saying `default` the default, the bracketed note cut from the label."""
    cli = write_cli(tmp_path / "cursor-agent", "2026.05.01", LISTING)
    catalog = await CursorBackend(str(cli)).models()
    assert catalog.result() == {
        "status": "completed",
        "models": [
            {"id": "auto", "label": "Auto", "provider": "cursor"},
            {"id": "composer-2-fast", "label": "Composer 2 Fast", "provider": "cursor",
             "default": True},
            {"id": "claude-4.6-sonnet-medium", "label": "Claude 4.6 Sonnet", "provider": "cursor"},
            {"id": "gpt-5.5", "label": "GPT-5.5", "provider": "cursor"},
        ],
        "supported": True,
        "fallback": False,
    }  # fmt: skip
    assert runs_of(cli) == [["--list-models"]]


@pytest.mark.parametrize("lines", [(), ("Available models", "", "No models (not logged in)")])
async def test_nothing_listed_is_multicas_stand_in_list(
    tmp_path: Path, lines: tuple[str, ...]
) -> None:
    """No rows (or no CLI at all): `auto` alone, the default, marked as a stand-in."""
    cli = write_cli(tmp_path / "cursor-agent", "2026.05.01", lines)
    for backend in (CursorBackend(str(cli)), CursorBackend(str(tmp_path / "missing"))):
        catalog = await backend.models()
        assert catalog.fallback
        assert catalog.result()["models"] == [
            {"id": "auto", "label": "Auto", "provider": "cursor", "default": True}
        ]
