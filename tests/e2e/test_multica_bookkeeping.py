"""What the terminal calls say of a run's sessions, and the prepare lease of a slow setup,
through the daemon, against the Multica-faithful server."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.multica_server import multica_server
from tests.helpers import running_daemon

pytestmark = pytest.mark.anyio

# A stand-in Claude Code whose sessions are all gone: a resume is refused as the CLI refuses
# it (tests/fixtures/claude-stream-json/resume-missing.jsonl); a fresh run names `fresh-1`.
GONE_CLAUDE = """#!{python}
import json, sys
if "--version" in sys.argv:
    print("2.1.0 (Claude Code)")
    sys.exit(0)
sys.stdin.readline()
if "--resume" in sys.argv:
    gone = sys.argv[sys.argv.index("--resume") + 1]
    print(json.dumps({{"type": "result", "subtype": "error_during_execution", "is_error": True,
                      "session_id": gone,
                      "errors": ["No conversation found with session ID: " + gone]}}), flush=True)
    sys.exit(1)
print(json.dumps({{"type": "system", "subtype": "init", "session_id": "fresh-1"}}), flush=True)
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False,
                  "result": "done", "session_id": "fresh-1"}}), flush=True)
"""

# A stand-in `codex exec --json` that names a thread and answers with its prompt, but never
# writes the thread's rollout (as a Codex that crashed before flushing it).
NO_ROLLOUT_CODEX = """#!{python}
import json, sys
if "--version" in sys.argv:
    print("codex-cli 0.169.0")
    sys.exit(0)
prompt = sys.stdin.read()
print(json.dumps({{"type": "thread.started", "thread_id": "th-lost"}}), flush=True)
print(json.dumps({{"type": "item.completed",
                  "item": {{"id": "i1", "type": "agent_message", "text": prompt}}}}), flush=True)
print(json.dumps({{"type": "turn.completed", "usage": {{"input_tokens": 1, "output_tokens": 1}}}}),
      flush=True)
"""


def _cli(tmp_path: Path, name: str, script: str) -> str:
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(script.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


async def test_a_session_the_agent_could_not_resume_is_retired(tmp_path: Path) -> None:
    """The claim's session is gone: the run goes on in a fresh one, and `complete` names the
    fresh session and retires the gone one, which the server never offers again."""
    claude = _cli(tmp_path, "claude", GONE_CLAUDE)
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, MULTICA_CLAUDE_PATH=claude),
    ):
        task_id = fake.queue_issue("issue-1", provider="claude", prior_session_id="gone-1")
        task = await fake.finished(task_id)
        (complete,) = fake.seen("complete")
    assert task.status == "completed", task.error
    assert complete.body["session_id"] == "fresh-1"
    assert complete.body["retired_session_id"] == "gone-1"
    assert task.retired_session_id == "gone-1"


async def test_a_codex_thread_without_rollout_is_withheld_and_the_next_run_told(
    tmp_path: Path,
) -> None:
    """The thread never reached the disk: `complete` carries no session but
    `session_rollout_missing`, and the next run on the issue is told its context is gone."""
    codex = _cli(tmp_path, "codex", NO_ROLLOUT_CODEX)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path / "user")}
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, base_env=env, MULTICA_CODEX_PATH=codex),
    ):
        agent = {"id": "ag-1"}  # one agent's two runs on one issue
        first = await fake.finished(fake.queue_issue("issue-1", provider="codex", agent=agent))
        second_id = fake.queue_issue("issue-1", provider="codex", agent=agent)
        second = await fake.finished(second_id)
        completes = [r.body for r in fake.seen("complete")]
    assert first.status == second.status == "completed", (first.error, second.error)
    assert "session_id" not in completes[0] or not completes[0]["session_id"]
    assert completes[0]["session_rollout_missing"] is True
    assert first.session_id == ""
    claimed = fake.tasks[second_id].claimed
    assert claimed is not None and claimed["prior_session_resume_unavailable"] is True
    assert "prior_session_id" not in claimed
    assert "## Session Continuity Notice" in second.output


async def test_a_slow_setup_keeps_its_claim_through_the_prepare_lease(tmp_path: Path) -> None:
    """Resolving the agent's skill takes longer than the claim window and the lease: renewed
    every 0.1 s, the lease keeps the task from being handed out again."""
    skills = [{"id": "sk-1", "name": "deploy", "content": "Deploy it."}]
    agent = tmp_path / "agent.py"
    agent.write_text('import json; print(json.dumps({"type": "result", "output": "ok"}))')
    command = {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(agent)}
    async with multica_server() as fake:
        fake.claim_recovery, fake.prepare_lease = 0.3, 0.6
        fake.slow_answers("resolve", 2.0)
        async with running_daemon(tmp_path, fake.url, prepare_lease_every=0.1, **command):
            task_id = fake.queue_issue(provider="command", agent={"skills": skills})
            task = await fake.finished(task_id)
    assert task.status == "completed", task.error
    assert len(fake.seen("prepare-lease")) >= 5
    assert task.deliveries == 1
    assert json.dumps(fake.seen("prepare-lease")[0].body) == "{}"
