"""Skills by reference: Multica's manifest hash, the bundle check, the owner-only cache."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from daemon.protocol.models import Agent, Skill, SkillRef, Task
from daemon.task.setup.skill_bundles import SkillBundleError, resolve_skills
from daemon.task.setup.skill_cache import SkillBundleCache
from daemon.task.setup.skill_manifest import manifest, matches, self_ref
from daemon.testing import FakeTaskServer


def test_the_manifest_hash_is_multicas() -> None:
    """The hash of a skill with files and non-ASCII text is the one Go's BuildManifest makes."""
    skill = Skill(
        id="sk-1",
        source="workspace",
        name="Deploy",
        description="Ship it — safely",
        content="# Deploy\nRun make deploy.\n",
        files=[
            {"path": "scripts/run.sh", "content": "#!/bin/sh\necho ü\n"},  # type: ignore[list-item]
            {"path": "README.md", "content": "read me"},  # type: ignore[list-item]
        ],
    )
    assert manifest(skill) == (
        "sha256:eae7bbf3ff6df8acb101e2b6031b5834fc49248c20046e96ad8e4b5140872ba5",
        51,
        2,
    )


def _bundle(content: str = "body") -> Skill:
    skill = Skill(id="sk", source="workspace", name="S", content=content)
    return skill.model_copy(update={"hash": manifest(skill)[0]})


def test_the_cache_drops_a_changed_bundle_and_stays_under_its_cap(tmp_path: Path) -> None:
    """Owner-only; a bundle edited on disk no longer loads (and is removed); past the cap the
    oldest bundle goes."""
    cache = SkillBundleCache(tmp_path / "cache", cap_bytes=600)
    first = _bundle("first " * 20)
    cache.store("ws", first)
    ref = self_ref(first)
    assert cache.load("ws", ref) == first
    (path,) = (tmp_path / "cache").rglob("bundle.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "cache" / "ws").stat().st_mode) == 0o700
    path.write_text(path.read_text().replace("first", "worst"))
    assert cache.load("ws", ref) is None and not path.exists()
    cache.store("ws", first)
    second = _bundle("second " * 40)
    cache.store("ws", second)
    assert cache.load("ws", ref) is None  # evicted: the two do not fit in 600 bytes
    assert cache.load("ws", self_ref(second)) == second


def test_a_reference_reads_from_a_claim() -> None:
    """`skill_refs` in a claim's agent become references; odd entries are skipped."""
    agent = Agent.model_validate({"skill_refs": [{"id": "a", "hash": "h", "file_count": 2}, 7]})
    assert agent.skill_refs == [SkillRef(id="a", hash="h", file_count=2)]


def test_a_bundle_with_a_path_out_of_its_skill_never_matches() -> None:
    """A file path that climbs out of the skill (or is absolute) fails the check, as in Go."""
    for path in ("../escape.md", "/etc/passwd", "a/../../b", "a\\b"):
        skill = Skill(id="sk", source="workspace", name="S", files=[{"path": path, "content": "x"}])  # type: ignore[list-item]
        bundle = skill.model_copy(update={"hash": manifest(skill)[0]})
        assert not matches(self_ref(bundle), bundle), path


@pytest.mark.anyio
async def test_resolving_asks_once_per_missing_skill_and_fails_on_a_missing_one(
    tmp_path: Path,
) -> None:
    """A cached bundle is not asked for again; a skill the server cannot serve fails."""
    server = FakeTaskServer()
    bundle = _bundle("kept")
    server.bundles[("workspace", "sk")] = bundle
    ref = self_ref(bundle).model_copy(update={"name": "S"})
    task = Task(id="t-1", workspace_id="ws", agent=Agent(skill_refs=[ref]))
    cache = SkillBundleCache(tmp_path / "cache")
    first = await resolve_skills(server, task, cache)
    again = await resolve_skills(server, task, cache)
    assert first.agent.skills == again.agent.skills == [bundle]
    assert server.count("resolve_skill_bundle") == 1
    gone = Task(id="t-2", agent=Agent(skill_refs=[SkillRef(id="other", source="workspace")]))
    with pytest.raises(SkillBundleError, match=r"'other' \(0 bytes\) is unavailable: .*not found"):
        await resolve_skills(server, gone, None)
