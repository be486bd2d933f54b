"""Skills by reference through a whole daemon against the Multica-faithful server: resolved
through `skill-bundles/resolve`, checked, cached, and written where the agent's CLI finds them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import eventually, running_daemon

# Lists every skill file the agent finds in its work dir, with its content.
LIST_SKILLS = """
import json, os, pathlib
base = pathlib.Path(".agent_context/skills")
found = {str(p.relative_to(base)): p.read_text() for p in sorted(base.rglob("*")) if p.is_file()}
print(json.dumps({"type": "result", "output": json.dumps(found)}))
"""

SKILLS = [
    {
        "id": "sk-1",
        "name": "Deploy",
        "description": "Ship it",
        "content": "# Deploy\nRun make deploy.\n",
        "files": [{"path": "scripts/run.sh", "content": "#!/bin/sh\nmake deploy\n"}],
    },
    {"id": "sk-2", "name": "Review", "content": "Review carefully."},
]


async def _finished(fake: MulticaFake, task_id: str) -> Any:
    await eventually(lambda: fake.tasks[task_id].status in ("completed", "failed"), within=30)
    return fake.tasks[task_id]


def _agent(tmp_path: Path) -> dict[str, str]:
    script = tmp_path / "list_skills.py"
    script.write_text(LIST_SKILLS)
    return {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(script)}


@pytest.mark.anyio
async def test_referenced_skills_are_resolved_cached_and_written(tmp_path: Path) -> None:
    """The claim carries references; each is resolved once, written like an inline skill, and
    the next task with the same skills is served from the cache."""
    agent = {"id": "agent-1", "skills": SKILLS}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **_agent(tmp_path)):
        first = await _finished(fake, fake.queue_issue(provider="command", agent=agent))
        resolves = len(fake.seen("resolve"))
        second = await _finished(fake, fake.queue_issue(provider="command", agent=agent))
    assert first.status == "completed", first.error
    found = json.loads(first.output)
    assert found["deploy/scripts/run.sh"] == "#!/bin/sh\nmake deploy\n"
    assert found["deploy/SKILL.md"].endswith("# Deploy\nRun make deploy.\n")
    assert "review/SKILL.md" in found
    assert resolves == 2
    assert [r.body["skills"][0]["id"] for r in fake.seen("resolve")] == ["sk-1", "sk-2"]
    assert second.status == "completed" and json.loads(second.output) == found


@pytest.mark.anyio
async def test_a_skill_edited_after_the_claim_arrives_in_its_new_version(tmp_path: Path) -> None:
    """The server serves the skill's current version; it is checked against its own hash."""
    agent = {"id": "agent-1", "skills": SKILLS[1:]}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **_agent(tmp_path)):
        fake.skill_edits["sk-2"] = {"content": "Review twice."}
        task = await _finished(fake, fake.queue_issue(provider="command", agent=agent))
    assert task.status == "completed", task.error
    assert json.loads(task.output)["review/SKILL.md"].endswith("Review twice.")


@pytest.mark.anyio
async def test_a_bundle_that_does_not_match_its_hash_fails_the_task(tmp_path: Path) -> None:
    """A corrupted bundle is never given to the agent: the task fails saying which skill."""
    agent = {"id": "agent-1", "skills": SKILLS[:1]}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **_agent(tmp_path)):
        fake.bundle_tamper = True
        task = await _finished(fake, fake.queue_issue(provider="command", agent=agent))
    assert task.status == "failed"
    assert "skill 'Deploy'" in task.error and "does not match its hash" in task.error
    assert fake.seen("start") == []  # failed before the agent was started
    assert list((tmp_path / "state").rglob("bundle.json")) == []
