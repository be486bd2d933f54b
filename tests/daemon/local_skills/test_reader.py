"""Local skills read for the server: in the daemon for its own user, as the agent user
otherwise — so a link the agent planted reaches only what the agent itself may read."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from daemon.local_skills.reader import LocalInventory
from tests.fakes.system_user import system_user

pytestmark = pytest.mark.anyio


def skill(folder: Path, body: str = "Body.\n") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(body)


async def test_the_daemons_own_home_is_read_in_the_daemon(tmp_path: Path) -> None:
    """Without an agent user: the home `base_env` names, listed and imported."""
    skill(tmp_path / ".pi/agent/skills/fmt", "---\nname: fmt\n---\nFormat.\n")
    inventory = LocalInventory({"HOME": str(tmp_path), "PATH": "/usr/bin"})
    listing = await inventory.listing("pi")
    assert [s["key"] for s in listing["skills"]] == ["fmt"] and listing["supported"]
    bundle = await inventory.bundle("pi", "fmt")
    assert bundle["status"] == "completed"
    assert bundle["skill"]["content"] == "---\nname: fmt\n---\nFormat.\n"


@pytest.mark.root
async def test_the_agent_users_home_is_read_as_that_user(tmp_path: Path) -> None:
    """The agent's skills are listed and imported; its link to a root-only skill folder is
    followed only as far as the agent may go, so that skill is neither listed nor imported."""
    secret = Path("/root") / f"agent-daemon-secret-{os.getpid()}"
    skill(secret / "stolen", "root's own words\n")
    try:
        with system_user() as user:
            home = Path(user.home)
            mine = home / ".claude" / "skills"
            skill(mine / "review", "---\nname: review\n---\nReview.\n")
            (mine / "stolen").symlink_to(secret / "stolen")
            for place in [home / ".claude", mine, mine / "review", mine / "review" / "SKILL.md"]:
                os.chown(place, user.uid, user.gid)
            os.lchown(mine / "stolen", user.uid, user.gid)
            inventory = LocalInventory({"HOME": "/root", "PATH": "/usr/bin"}, user)
            listing = await inventory.listing("claude")
            stolen = await inventory.bundle("claude", "stolen")
            review = await inventory.bundle("claude", "review")
    finally:
        shutil.rmtree(secret)
    assert listing["status"] == "completed", listing
    assert [s["key"] for s in listing["skills"]] == ["review"]
    assert listing["skills"][0]["source_path"] == "~/.claude/skills/review"
    assert review["skill"]["content"].endswith("Review.\n")
    assert stolen["status"] == "failed" and "root's own words" not in str(stolen)
