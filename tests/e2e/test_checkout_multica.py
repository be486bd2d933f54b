"""`multica repo checkout` inside a Multica task: real git, `file://` repositories, the
Multica-faithful server, an agent calling the health port as the CLI does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from daemon.workdirs.names import bare_dir_name
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.fakes.repo_checkout import calls, checkout_agent, git, make_origin
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio

AGENT = {"name": "Review Bot!", "custom_env": {}}


def _agent(**custom_env: str) -> dict[str, Any]:
    return {**AGENT, "custom_env": custom_env}


async def _report(fake: MulticaFake, task_id: str) -> dict[str, Any]:
    await eventually(lambda: fake.tasks[task_id].status in ("completed", "failed"), within=60)
    task = fake.tasks[task_id]
    assert task.status == "completed", task.error
    report: dict[str, Any] = json.loads(task.output)
    return report


async def test_an_agent_checks_out_a_workspace_repo_on_its_own_branch(tmp_path: Path) -> None:
    """The register answer's repo is cached under `.repos/` and checked out on Go's branch."""
    url = make_origin(tmp_path / "origins")
    async with multica_server() as fake:
        fake.add_repo(url)
        async with running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)):
            bare = tmp_path / "workspaces" / ".repos" / fake.workspace_id / bare_dir_name(url)
            await eventually(lambda: (bare / "HEAD").is_file(), within=30)
            task_id = fake.queue_issue(provider="command", agent=_agent(**calls({"url": url})))
            report = await _report(fake, task_id)
    (answer,) = report["answers"]
    work = Path(report["cwd"])
    assert answer["status"] == 200
    assert answer["path"] == str(work / "app")
    assert answer["branch_name"] == f"agent/review-bot/{task_id.replace('-', '')[-12:]}"
    assert (work / "app" / "README.md").read_text() == "main\n"
    assert (bare / ".multica_last_used").read_text().endswith("Z")  # Go's GC reads this stamp
    assert git("rev-parse", "--abbrev-ref", "HEAD", cwd=work / "app") == answer["branch_name"]
    assert git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=work / "app") == str(
        bare
    )


async def test_the_claims_ref_is_the_base_unless_the_request_names_one(tmp_path: Path) -> None:
    """A task's repo `ref` from the claim bases the checkout; a request's own `ref` wins."""
    url = make_origin(tmp_path / "origins", branches={"feature": "feature", "fix": "fix"})
    ask = calls(
        {"url": url},
        {"url": url, "ref": "fix", "cwd": "second"},
        then="report['texts'] = [open(a['path'] + '/README.md').read() for a in answers]",
    )
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)),
    ):
        repos = [{"url": url, "ref": "feature"}]
        task_id = fake.queue_issue(provider="command", agent=_agent(**ask), repos=repos)
        report = await _report(fake, task_id)
    assert [a["status"] for a in report["answers"]] == [200, 200]
    assert report["texts"] == ["feature\n", "fix\n"]


async def test_each_refusal_is_gos_answer_and_changes_nothing(tmp_path: Path) -> None:
    """Method, token, body, mode, option-like URL or ref, identity, workdir (a link out of it
    too), unknown URL, web page or foreign Host: each refused with Go's status, then a proper
    call still works; after the task, its token opens nothing."""
    url = make_origin(tmp_path / "origins")
    outside = tmp_path / "outside"
    outside.mkdir()
    pwned = tmp_path / "pwned"
    ask = calls(
        {"url": url, "method": "GET"},
        {"url": url, "headers": {"Authorization": None}},
        {"url": url, "headers": {"Authorization": "Bearer mat_not_a_running_task"}},
        {"url": url, "body": {"raw": "{not json"}},
        {"url": url, "body": {"checkout_mode": "shared"}},
        {"url": f"--upload-pack=touch {pwned}"},
        {"url": f"ext::sh -c touch% {pwned}"},
        {"url": url, "ref": "--orphan"},
        {"url": url, "body": {"task_id": "another-task"}},
        {"url": url, "body": {"workspace_id": "another-workspace"}},
        {"url": url, "cwd": str(outside)},
        {"url": url, "cwd": "escape"},
        {"url": "file:///nowhere/unknown.git"},
        {"url": url, "headers": {"Origin": "http://evil.example"}},
        {"url": url, "headers": {"Host": "evil.example"}},
        {"url": url},
        first=f"os.symlink({str(outside)!r}, 'escape')",
    )
    async with multica_server() as fake:
        fake.add_repo(url)
        async with running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)) as d:
            task_id = fake.queue_issue(provider="command", agent=_agent(**ask))
            report = await _report(fake, task_id)
            token = fake.tasks[task_id].auth_token
            body = {"url": url, "workspace_id": fake.workspace_id, "task_id": task_id}
            async with httpx.AsyncClient(base_url=d.health_url) as probe:
                ended = await probe.post(
                    "/repo/checkout",
                    json={**body, "workdir": report["cwd"]},
                    headers={"Authorization": f"Bearer {token}"},
                )
    statuses = [a["status"] for a in report["answers"]]
    assert statuses == [
        405,
        401,
        401,
        400,
        400,
        400,
        400,
        400,
        403,
        403,
        403,
        403,
        400,
        403,
        403,
        200,
    ]
    assert "not configured" in report["answers"][12]["error"]
    # As Go: the list (and the workspace's settings) is asked for before each checkout that
    # gets that far: the unknown URL's and the proper one's.
    assert len(fake.seen("repos")) == 2
    assert ended.status_code == 401
    assert not pwned.exists() and list(outside.iterdir()) == []


async def test_a_url_added_after_register_is_found_by_asking_the_server(tmp_path: Path) -> None:
    """A repo the workspace gained after register, not in the claim (a project's repos are), is
    allowed once the workspace's list is fetched again."""
    url = make_origin(tmp_path / "origins")
    project = [{"url": make_origin(tmp_path / "origins", "lib")}]
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)),
    ):
        fake.add_repo(url)
        agent = _agent(**calls({"url": url}))
        task_id = fake.queue_issue(provider="command", agent=agent, repos=project)
        report = await _report(fake, task_id)
    assert report["answers"][0]["status"] == 200
    assert [r.path for r in fake.seen("repos")] == [
        f"/api/daemon/workspaces/{fake.workspace_id}/repos"
    ]


# Both agents wait until both have their checkout, then look at their own again.
BARRIER = """
import pathlib, time
here = pathlib.Path(os.environ['BARRIER']) / os.environ['MULTICA_TASK_ID']
here.write_text('')
deadline = time.time() + 30
while len(list(here.parent.iterdir())) < 2 and time.time() < deadline:
    time.sleep(0.05)
path = answers[0]['path']
report['status'] = subprocess.run(['git', '-C', path, 'status', '--porcelain'],
                                  capture_output=True, text=True).stdout
report['head'] = subprocess.run(['git', '-C', path, 'rev-parse', '--abbrev-ref', 'HEAD'],
                                capture_output=True, text=True).stdout.strip()
"""


async def test_two_tasks_on_one_repo_each_get_their_own_worktree(tmp_path: Path) -> None:
    """Two tasks running at once check out one repository: two worktrees, two branches."""
    url = make_origin(tmp_path / "origins")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    ask = {**calls({"url": url}, then=BARRIER), "BARRIER": str(barrier)}
    async with multica_server() as fake:
        fake.add_repo(url)
        async with running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)):
            ids = [fake.queue_issue(provider="command", agent=_agent(**ask)) for _ in range(2)]
            reports = [await _report(fake, task_id) for task_id in ids]
    answers = [r["answers"][0] for r in reports]
    assert [a["status"] for a in answers] == [200, 200]
    assert len({a["path"] for a in answers}) == len({a["branch_name"] for a in answers}) == 2
    for report, answer in zip(reports, answers, strict=True):
        assert report["head"] == answer["branch_name"] and report["status"] == ""
        assert Path(answer["path"]).parent == Path(report["cwd"])


LEAVE_WORK = """
path = answers[0]['path']
open(path + '/README.md', 'a').write('edited\\n')
open(path + '/notes.txt', 'w').write('half done\\n')
"""
READ_WORK = """
path = answers[0]['path']
report['readme'] = open(path + '/README.md').read()
report['notes'] = open(path + '/notes.txt').read()
"""


async def test_a_reused_work_dir_keeps_the_agents_uncommitted_work(tmp_path: Path) -> None:
    """A follow-up on the same issue checks out again: the edits and new file are still there,
    on the branch they were made on (Go would reset them away)."""
    url = make_origin(tmp_path / "origins")
    agent_id = "7b0f4a9e-58a1-4e0a-9d43-1f0c2b7d5e11"
    async with multica_server() as fake:
        fake.add_repo(url)
        async with running_daemon(tmp_path, fake.url, health=True, **checkout_agent(tmp_path)):
            first_agent = {**_agent(**calls({"url": url}, then=LEAVE_WORK)), "id": agent_id}
            first = fake.queue_issue("issue-9", provider="command", agent=first_agent)
            before = await _report(fake, first)
            again = {**_agent(**calls({"url": url}, then=READ_WORK)), "id": agent_id}
            work_dir = fake.tasks[first].work_dir
            second = fake.queue_issue(
                "issue-9", provider="command", agent=again, prior_work_dir=work_dir
            )
            after = await _report(fake, second)
    assert after["cwd"] == before["cwd"]
    assert after["answers"][0] == before["answers"][0]
    assert after["readme"] == "main\nedited\n" and after["notes"] == "half done\n"


async def test_a_missing_git_is_one_clear_line_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Workspaces with repositories and no git on the PATH: one error line at start, and a
    checkout says why it cannot be made."""
    url = make_origin(tmp_path / "origins")
    async with multica_server() as fake:
        fake.add_repo(url)
        other = fake.add_workspace()
        fake.add_repo(url, other)
        async with running_daemon(
            tmp_path,
            fake.url,
            base_env={"PATH": str(tmp_path / "no-git")},
            health=True,
            **checkout_agent(tmp_path),
        ):
            task_id = fake.queue_issue(provider="command", agent=_agent(**calls({"url": url})))
            report = await _report(fake, task_id)
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("git is not")]
    assert len(said) == 1 and "cannot check them out until git is on the PATH" in said[0]
    assert report["answers"] == [
        {"status": 500, "error": "git is not installed (not found on the PATH)\n"}
    ]
