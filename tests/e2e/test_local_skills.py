"""A daemon against the Multica-faithful server answers the Skills and MCP tabs of a runtime:
the skills in its CLI's user folders with their file counts and MCP servers, and a skill's
bundle when the user imports it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from backends.claude import ClaudeBackend
from tests.fakes.multica_server import multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio


async def test_a_claude_runtime_reports_its_skills_and_mcp_and_imports_one(tmp_path: Path) -> None:
    """`pending_local_skills` gets the list (`file_count`, root, MCP servers with their
    transport); `pending_local_skill_imports` the bundle, the SKILL.md and its files."""
    home = tmp_path / "operator"
    review = home / ".claude" / "skills" / "review"
    (review / "checks").mkdir(parents=True)
    (review / "SKILL.md").write_text("---\nname: review\ndescription: Reviews.\n---\nDo it.\n")
    (review / "checks" / "style.md").write_text("Be kind.")
    (home / ".agents" / "skills" / "shared").mkdir(parents=True)
    (home / ".agents" / "skills" / "shared" / "SKILL.md").write_text("Shared.\n")
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"gh": {"url": "https://g"}}}))
    claude = ClaudeBackend("/bin/true")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home)}
    async with multica_server() as fake, running_daemon(
        tmp_path, fake.url, base_env=env, backends={"claude": (claude, "2.1.332")},
        MULTICA_DAEMON_HEARTBEAT_INTERVAL="100ms",
    ) as d:  # fmt: skip
        (runtime,) = [r for r in fake.live_runtimes() if r.provider == "claude"]
        runtime.queued["pending_local_skills"] = {"id": "s1"}
        runtime.queued["pending_local_skill_imports"] = [{"id": "i1", "skill_key": "review"}]
        await eventually(lambda: len(fake.action_results) >= 2)
        assert d.worker.status == "running"
    results = {r["kind"]: r for r in fake.action_results}
    listing = results["local-skills"]
    assert (listing["runtime_id"], listing["request_id"]) == (runtime.id, "s1")
    assert listing["supported"] and listing["mcp_supported"]
    assert [(s["key"], s["root"], s["file_count"]) for s in listing["skills"]] == [
        ("review", "provider", 2),
        ("shared", "universal", 1),
    ]
    assert listing["skills"][0]["description"] == "Reviews."
    assert listing["mcp_servers"] == [
        {"name": "gh", "transport": "http", "source": "User config", "enabled": True}
    ]
    imported = results["local-skills/import"]
    assert imported["status"] == "completed" and imported["request_id"] == "i1"
    assert imported["skill"]["content"].endswith("Do it.\n")
    assert imported["skill"]["files"] == [{"path": "checks/style.md", "content": "Be kind."}]
    assert imported["skill"]["source_path"] == "~/.claude/skills/review"
