"""CodeBuddy Code's catalog from a stand-in `codebuddy` answering the ACP handshake (`--acp`)
in the shape CodeBuddy documents: its account's models, its effort option narrowed to what
`--effort` takes; Multica's stand-in list when it does not answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from backends.codebuddy import CodebuddyBackend
from tests.fakes.agent_cli import runs_of, write_cli

pytestmark = pytest.mark.anyio

SESSION: dict[str, Any] = {
    "sessionId": "ses-1",
    "models": {
        "currentModelId": "hy3",
        "availableModels": [
            {"modelId": "hy3", "name": "Hy3", "description": "x0.00 credits"},
            {"modelId": "glm-5.2", "name": "GLM-5.2", "description": "x0.79 credits"},
            {"modelId": "kimi-k3-1", "name": "Kimi-K3"},
            {"modelId": "deepseek-v3-2-volc", "name": "DeepSeek-V3.2"},
            {"modelId": "mystery-1", "name": ""},
        ],
    },
    "configOptions": [
        {"type": "select", "id": "mode", "currentValue": "default",
         "options": [{"value": "default", "name": "Default"}]},
        {"type": "select", "id": "thought_level", "category": "thought_level",
         "currentValue": "enabled",
         "options": [{"value": "low", "name": "Low"}, {"value": "high", "name": "High"},
                     {"value": "xhigh", "name": "X-High"},
                     {"value": "enabled", "name": "On (default)"}]},
    ],
}  # fmt: skip


def acp_answers(session: dict[str, Any]) -> tuple[str, str]:
    """The two answers of the handshake: `initialize` (id 1), then `session/new` (id 2)."""
    init = {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}}
    return (
        json.dumps({"jsonrpc": "2.0", "id": 1, "result": init}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "result": session}),
    )


def levels_of(model: dict[str, Any]) -> list[str]:
    return [level["value"] for level in model["thinking"]["supported_levels"]]


async def test_the_account_models_with_the_efforts_the_flag_takes(tmp_path: Path) -> None:
    """The session's models (its current one the default), vendors read from the ids, and
    every model the option's levels `--effort` takes, labelled as CodeBuddy's picker;
    `enabled` is no level and, being the current value, no default either."""
    cli = write_cli(tmp_path / "codebuddy", "2.130.0", acp_answers(SESSION))
    catalog = await CodebuddyBackend(str(cli)).models()
    models = catalog.result()["models"]
    assert [(m["id"], m["label"], m.get("provider"), m.get("default")) for m in models] == [
        ("hy3", "Hy3", "hunyuan", True),
        ("glm-5.2", "GLM-5.2", "zhipu", None),
        ("kimi-k3-1", "Kimi-K3", "kimi", None),
        ("deepseek-v3-2-volc", "DeepSeek-V3.2", "deepseek", None),
        ("mystery-1", "mystery-1", None, None),
    ]
    assert all(levels_of(m) == ["low", "high", "xhigh"] for m in models)
    assert models[0]["thinking"]["supported_levels"][2] == {"value": "xhigh", "label": "Extra high"}
    assert "default_level" not in models[0]["thinking"]
    assert not catalog.fallback
    assert runs_of(cli) == [["--acp"]]


async def test_no_usable_effort_option_gives_the_six_levels(tmp_path: Path) -> None:
    """An option with nothing `--effort` takes (or none at all): the six, `medium` default."""
    session = {**SESSION, "configOptions": [SESSION["configOptions"][1] | {"options": []}]}
    cli = write_cli(tmp_path / "codebuddy", "2.130.0", acp_answers(session))
    (first, *_) = (await CodebuddyBackend(str(cli)).models()).result()["models"]
    assert levels_of(first) == ["minimal", "low", "medium", "high", "xhigh", "max"]
    assert first["thinking"]["default_level"] == "medium"


async def test_a_cli_that_does_not_answer_gets_the_stand_in_list(tmp_path: Path) -> None:
    """Not signed in (`session/new` refused) or no CLI: Multica's list, marked a stand-in,
    Claude Sonnet 4.6 the default, each model with the six levels."""
    refused = json.dumps(
        {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "not authenticated"}}
    )
    cli = write_cli(tmp_path / "codebuddy", "2.130.0", (acp_answers(SESSION)[0], refused))
    for backend in (CodebuddyBackend(str(cli)), CodebuddyBackend(str(tmp_path / "gone"))):
        catalog = await backend.models()
        models = catalog.result()["models"]
        assert catalog.fallback and models[0]["id"] == "claude-sonnet-4.6" and models[0]["default"]
        assert levels_of(models[-1]) == ["minimal", "low", "medium", "high", "xhigh", "max"]
