"""Each JSON-lines backend's tested range ends at the newest version the real-CLI tests run."""

from __future__ import annotations

import pytest

from backends.agent_cli import AgentCli
from backends.claude import ClaudeBackend
from backends.codex import CodexBackend
from backends.copilot import CopilotBackend
from backends.pi import PiBackend
from backends.qwen import QwenBackend
from tests.fakes.real_cli import CLAUDE_PINS, CODEX_PINS, pinned_version

NEWEST = {
    ClaudeBackend: CLAUDE_PINS[0].version,
    CodexBackend: CODEX_PINS[0].version,
    CopilotBackend: pinned_version("@github/copilot"),
    PiBackend: pinned_version("@mariozechner/pi-coding-agent"),
    QwenBackend: pinned_version("@qwen-code/qwen-code"),
}


@pytest.mark.parametrize("backend", list(NEWEST), ids=lambda b: b.name)
def test_tested_max_is_the_newest_pinned_version(backend: type[AgentCli]) -> None:
    """A bump of a pin in tests/real_cli/package.json moves the ceiling with it."""
    assert backend.tested_max == NEWEST[backend]
