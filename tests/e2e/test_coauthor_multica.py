"""The co-author trailer on an agent's commits in its checkouts, as the workspace's settings
say, through the daemon, against the Multica-faithful server: real git, `file://` origins."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.workdirs.coauthor import MARKER, TRAILER
from daemon.workdirs.names import bare_dir_name
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.fakes.repo_checkout import calls, checkout_agent, make_origin
from tests.helpers import running_daemon

pytestmark = pytest.mark.anyio

# After its checkout the agent commits there and says with which message.
COMMIT = """
path = answers[0]['path']
def git(*argv):
    return subprocess.run(['git', *argv], cwd=path, capture_output=True, text=True)
open(path + '/README.md', 'a').write('by the agent\\n')
git('add', 'README.md')
done = git('-c', 'user.name=Bot', '-c', 'user.email=bot@example.com', 'commit', '-qm', 'Agent work')
report['commit'] = (done.returncode, done.stderr)
report['message'] = git('log', '-1', '--format=%B').stdout
"""


async def _commit(fake: MulticaFake, url: str, **body: str) -> dict[str, Any]:
    """One task that checks `url` out (with `body`'s overrides) and commits there."""
    agent = {"name": "Bot", "custom_env": calls({"url": url, "body": body}, then=COMMIT)}
    task = await fake.finished(fake.queue_issue(provider="command", agent=agent), within=60)
    assert task.status == "completed", task.error
    report: dict[str, Any] = json.loads(task.output)
    assert report["answers"][0]["status"] == 200, report["answers"]
    assert report["commit"][0] == 0, report["commit"]
    return report


async def test_commits_carry_the_trailer_until_the_workspace_turns_it_off(
    tmp_path: Path,
) -> None:
    """No settings: the cache's hook adds the trailer (once, with git's trailer layout). The
    setting switched off in the web UI counts from the next checkout: the hook is gone."""
    url = make_origin(tmp_path / "origins")
    async with multica_server() as fake:
        fake.add_repo(url)
        async with running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)):
            first = await _commit(fake, url)
            hook = (
                (tmp_path / "workspaces" / ".repos" / fake.workspace_id / bare_dir_name(url))
                / "hooks"
                / "prepare-commit-msg"
            )
            written, mode = hook.read_text(), hook.stat().st_mode
            fake.settings[fake.workspace_id] = {"co_authored_by_enabled": False}
            second = await _commit(fake, url)
    assert first["message"] == f"Agent work\n\n{TRAILER}\n\n"
    assert MARKER in written and mode & 0o111 == 0o111
    assert not hook.exists()
    assert TRAILER not in second["message"]


async def test_the_github_switch_turns_the_trailer_off_and_keeps_a_users_hook(
    tmp_path: Path,
) -> None:
    """`github_enabled: false` means no trailer, and a hook that is not Multica's stays."""
    url = make_origin(tmp_path / "origins")
    async with multica_server() as fake:
        fake.add_repo(url)
        fake.settings[fake.workspace_id] = {"github_enabled": False, "co_authored_by_enabled": True}
        async with running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)):
            bare = tmp_path / "workspaces" / ".repos" / fake.workspace_id / bare_dir_name(url)
            theirs = "#!/bin/sh\necho 'Signed-off-by: Someone <s@example.com>' >> \"$1\"\n"
            await _commit(fake, url)  # the cache exists from here on
            (bare / "hooks" / "prepare-commit-msg").write_text(theirs)
            (bare / "hooks" / "prepare-commit-msg").chmod(0o755)
            report = await _commit(fake, url)
    assert TRAILER not in report["message"]
    assert "Signed-off-by: Someone" in report["message"]
    assert (bare / "hooks" / "prepare-commit-msg").read_text() == theirs


async def test_an_isolated_checkout_gets_the_hook_in_its_own_git_dir(tmp_path: Path) -> None:
    """`checkout_mode: isolated`: the clone's own `.git/hooks` carries it; the cache's none."""
    url = make_origin(tmp_path / "origins")
    async with multica_server() as fake:
        fake.add_repo(url)
        async with running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)):
            report = await _commit(fake, url, checkout_mode="isolated")
            bare = tmp_path / "workspaces" / ".repos" / fake.workspace_id / bare_dir_name(url)
    clone = Path(report["answers"][0]["path"])
    assert report["message"] == f"Agent work\n\n{TRAILER}\n\n"
    assert MARKER in (clone / ".git" / "hooks" / "prepare-commit-msg").read_text()
    assert not (bare / "hooks" / "prepare-commit-msg").exists()
