"""Antigravity's catalog from a stand-in `agy` printing `agy models`: 1.1.11's `id<TAB>label`
rows, an older version's bare ids; nothing guessed when it prints nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.antigravity import AntigravityBackend
from backends.models import Catalog
from tests.fakes.agent_cli import runs_of, write_cli

pytestmark = pytest.mark.anyio


async def test_tabbed_rows_give_a_label_and_bare_ids_are_their_own(tmp_path: Path) -> None:
    """`id<TAB>label` (a third column ignored), a bare id, blank lines and repeats skipped;
    the provider `antigravity`, no default, no thinking levels; nothing listed, nothing."""
    listing = (
        "gemini-3.1-pro\tGemini 3.1 Pro\tdefault",
        "",
        "claude-sonnet-4-6\t",
        "gpt-oss-120b",
        "gemini-3.1-pro\tAgain",
    )
    cli = write_cli(tmp_path / "agy", "1.1.11", listing)
    catalog = await AntigravityBackend(str(cli)).models()
    assert catalog.result()["models"] == [
        {"id": "gemini-3.1-pro", "label": "Gemini 3.1 Pro", "provider": "antigravity"},
        {"id": "claude-sonnet-4-6", "label": "claude-sonnet-4-6", "provider": "antigravity"},
        {"id": "gpt-oss-120b", "label": "gpt-oss-120b", "provider": "antigravity"},
    ]
    assert not catalog.fallback
    assert runs_of(cli) == [["models"]]
    # No answer (agy printing nothing, or none installed): no catalog, and none guessed.
    write_cli(cli, "1.1.11", ())
    for backend in (AntigravityBackend(str(cli)), AntigravityBackend(str(tmp_path / "gone"))):
        assert await backend.models() == Catalog()
