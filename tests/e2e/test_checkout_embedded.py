"""Without Multica: the embedded server offers repositories and the agent checks them out."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from daemon.server.serve import running_server
from tests.fakes.repo_checkout import calls, checkout_agent, make_origin
from tests.helpers import TOKEN, RunningDaemon, running_daemon

pytestmark = pytest.mark.anyio


def _read(path: Path) -> str:
    return path.read_text()


async def _run(d: RunningDaemon, custom_env: dict[str, str], repos: list[str]) -> dict[str, Any]:
    agent = {"name": "Local Bot", "custom_env": custom_env}
    task = await d.api.create_task("check out", backend="command", agent=agent, repos=repos)
    done = await d.wait(task["id"], within=60)
    assert done["status"] == "completed", done["error"]
    report: dict[str, Any] = json.loads(done["output"])
    return report


async def test_the_embedded_servers_repos_and_a_tasks_own_are_checked_out(
    tmp_path: Path,
) -> None:
    """A workspace repo (MULTICA_EMBEDDED_REPOS) and a `submit --repo` one both check out;
    a URL in neither is refused as Go refuses it."""
    app = make_origin(tmp_path / "origins", "app")
    lib = make_origin(tmp_path / "origins", "lib")
    async with (
        running_server(tmp_path / "server.db", token=TOKEN, repos=(app,)) as url,
        running_daemon(tmp_path, url, health=True, **checkout_agent(tmp_path)) as d,
    ):
        from_workspace = await _run(d, calls({"url": app}, {"url": lib}), [])
        from_task = await _run(d, calls({"url": lib}), [lib])
    (app_answer, lib_refused), (lib_answer,) = from_workspace["answers"], from_task["answers"]
    assert app_answer["status"] == 200 and app_answer["branch_name"].startswith("agent/local-bot/")
    assert _read(Path(app_answer["path"], "README.md")) == "main\n"
    assert lib_refused == {"status": 400, "error": "repo is not configured for this workspace\n"}
    assert lib_answer["status"] == 200 and lib_answer["path"].endswith("/lib")
