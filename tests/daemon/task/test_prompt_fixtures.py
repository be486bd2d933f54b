"""Comment, chat and per-run prompts are Multica's own, byte for byte: each claim of the
fixture was put through Go's `BuildPrompt`, and ours must write the same text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.protocol.models import Task
from daemon.task.setup.prompt import build_prompt

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "prompts" / "multica-prompts.json"
CASES: list[dict[str, Any]] = json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_the_prompt_is_gos(case: dict[str, Any]) -> None:
    """The claim's prompt is the one Go's daemon wrote for it."""
    assert build_prompt(Task.model_validate(case["claim"])) == case["prompt"]
