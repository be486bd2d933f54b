"""A Codex task through a whole daemon: its own CODEX_HOME, with the task's skills (by
reference from Multica), the user's login and config, and nothing in the work directory."""

from __future__ import annotations

import json
import os
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.multica_server import multica_server
from tests.helpers import eventually, running_daemon

# A stand-in `codex`: answers --version; for `exec --json` reports what its CODEX_HOME holds.
FAKE_CODEX = """#!{python}
import json, os, pathlib, sys
if "--version" in sys.argv:
    print("codex-cli 0.169.0")
    sys.exit(0)
sys.stdin.read()
home = pathlib.Path(os.environ["CODEX_HOME"])
seen = {{}}
for path in sorted(home.rglob("*")):
    rel = str(path.relative_to(home))
    if path.is_symlink():
        seen[rel] = "link -> " + os.readlink(path)
    elif path.is_file():
        seen[rel] = path.read_text()
report = {{"home": str(home), "seen": seen, "argv": sys.argv[1:]}}
print(json.dumps({{"type": "thread.started", "thread_id": "th-1"}}), flush=True)
print(json.dumps({{"type": "item.completed", "item": {{"id": "i1", "type": "agent_message",
                  "text": json.dumps(report)}}}}), flush=True)
print(json.dumps({{"type": "turn.completed", "usage": {{"input_tokens": 1, "output_tokens": 1}}}}),
      flush=True)
"""


def _user_home(tmp_path: Path) -> Path:
    """A user's ~/.codex with a login, a config and one skill of their own."""
    home = tmp_path / "user" / ".codex"
    (home / "skills" / "mine").mkdir(parents=True)
    (home / "skills" / "mine" / "SKILL.md").write_text("my own skill")
    (home / "auth.json").write_text('{"token": "user-login"}')
    (home / "config.toml").write_text('model = "gpt-test"\n')
    return home


@pytest.mark.anyio
async def test_codex_runs_with_its_own_home_and_the_tasks_skills(tmp_path: Path) -> None:
    """A Codex task (skills by reference from Multica) runs with CODEX_HOME in its task dir,
    where its skills, the user's login and config are; none lands in the work directory."""
    user = _user_home(tmp_path)
    codex = tmp_path / "bin" / "codex"
    codex.parent.mkdir()
    codex.write_text(FAKE_CODEX.format(python=sys.executable))
    codex.chmod(0o755)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "user")}
    skills = [{"id": "sk-1", "name": "Deploy", "content": "Run make deploy."}]
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, base_env=env, MULTICA_CODEX_PATH=str(codex)),
    ):
        task_id = fake.queue_issue(provider="codex", agent={"skills": skills})
        await eventually(lambda: fake.tasks[task_id].status in ("completed", "failed"), within=30)
    task: Any = fake.tasks[task_id]
    assert task.status == "completed", task.error
    report = json.loads(task.output)
    assert report["home"] == str(Path(task.work_dir).parent / "codex-home")
    seen = report["seen"]
    assert seen["skills/deploy/SKILL.md"].endswith("Run make deploy.")
    assert seen["auth.json"] == f"link -> {user / 'auth.json'}"
    assert tomllib.loads(seen["config.toml"])["model"] == "gpt-test"
    assert seen["skills/mine"] == f"link -> {user / 'skills' / 'mine'}"
    assert not (Path(task.work_dir) / ".agent_context" / "skills").exists()
