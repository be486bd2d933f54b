"""`multica repo checkout` inside a Multica task: real git, `file://` repositories, the
Multica-faithful server, an agent calling the health port as the CLI does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.workdirs.names import bare_dir_name
from tests.daemon.workdirs.support import calls, checkout_agent, git, make_origin
from tests.fakes.multica_server import MulticaFake, multica_server
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
