"""OpenClaw's catalog, its agents: from the real CLI (`openclaw agents list --json`, offline
with a config of two agents), and from a stand-in printing the other shapes Multica reads (an
`agents` object, a name-only entry of older versions, the plain listing as a last resort)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.openclaw import OpenclawBackend
from backends.openclaw.agents import parse_json
from tests.fakes.agent_cli import runs_of, write_cli
from tests.fakes.chat_api import MODEL, PROVIDER, openclaw_env
from tests.fakes.real_cli import require_cli

pytestmark = pytest.mark.anyio


@pytest.mark.real_cli
async def test_the_real_openclaw_lists_its_agents_by_id(tmp_path: Path) -> None:
    """Each agent once, by the id `--agent` takes; the label its name (else the id) with its
    model; the provider `openclaw`; OpenClaw's own default not marked (as in Multica)."""
    path = require_cli("openclaw", "MULTICA_TEST_OPENCLAW_PATH")
    env = openclaw_env(tmp_path, "http://127.0.0.1:9")
    config = tmp_path / "home" / ".openclaw" / "openclaw.json"
    written = json.loads(config.read_text())
    written["agents"]["list"] = [
        {"id": "main", "default": True},
        {"id": "reviewer", "name": "Code Reviewer", "model": f"{PROVIDER}/{MODEL}"},
    ]
    config.write_text(json.dumps(written))
    catalog = await OpenclawBackend(path, detect_env=env).models()
    assert catalog.result()["models"] == [
        {"id": "main", "label": f"main ({PROVIDER}/{MODEL})", "provider": "openclaw"},
        {"id": "reviewer", "label": f"Code Reviewer ({PROVIDER}/{MODEL})", "provider": "openclaw"},
    ]


async def test_an_agents_object_and_a_name_only_entry_are_read(tmp_path: Path) -> None:
    """`{"agents": [...]}` is read as the array (the first flag answered: no other asked);
    an entry without an id goes by its name, and an id is listed once."""
    listing = {"agents": [{"name": "ops"}, {"id": "ops", "model": "m"}, {"id": "b", "model": None}]}
    cli = write_cli(tmp_path / "openclaw", "OpenClaw 2026.9.6", [json.dumps(listing)])
    catalog = await OpenclawBackend(str(cli)).models()
    assert [(m.id, m.label) for m in catalog.models] == [("ops", "ops"), ("b", "b")]
    assert runs_of(cli) == [["agents", "list", "--json"]]


async def test_without_json_the_plain_listing_keeps_only_rows_of_two_ids(tmp_path: Path) -> None:
    """No JSON to any of the three flags Multica tries: the plain `agents list` is read, its
    `<agent> <model>` rows only (headers, bullets, box drawing, `Key: value` lines not)."""
    lines = ["Agents:", "╭─────╮", "│ main  fake/fake-chat", "- main (default)",
             "Model: fake/fake-chat", '[{"id": 3}]', "main fake/fake-chat", "ops gpt-5 extra",
             "main other"]  # fmt: skip
    cli = write_cli(tmp_path / "openclaw", "OpenClaw 2026.9.6", lines)
    catalog = await OpenclawBackend(str(cli)).models()
    assert [(m.id, m.label) for m in catalog.models] == [
        ("main", "main (fake/fake-chat)"),
        ("ops", "ops (gpt-5)"),
    ]
    assert runs_of(cli) == [
        ["agents", "list", "--json"],
        ["agents", "list", "--output", "json"],
        ["agents", "list", "-o", "json"],
        ["agents", "list"],
    ]


@pytest.mark.parametrize(
    "text", ["not json", "{}", '{"agents": {}}', '[{"id": 3}]', '["main"]'], ids=repr
)
def test_other_json_is_no_answer(text: str) -> None:
    """Anything but those shapes (with string fields) sends the read on to the next flag."""
    assert parse_json(text) is None
