"""A Multica task runs as Multica's Go daemon runs it, against the Multica-faithful server."""

from __future__ import annotations

import json
import os
import stat
import sys
import uuid
from pathlib import Path

import pytest

from daemon.protocol.failure import REASONS
from daemon.protocol.retry import RetryPolicy
from daemon.workdirs.names import task_key
from tests.fakes.multica_server import multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio

ISSUE_PROMPT = (
    "You are running as a local coding agent for a Multica workspace.\n\n"
    "Your assigned issue ID is: issue-7\n\n"
    "Start by running `multica issue get issue-7 --output json` to understand your task, then"
    " complete it.\n"
    "For comment history, follow the rule in your runtime workflow file (assignment-triggered"
    " tasks treat the read as mandatory). Scan the threads first with `multica issue comment list"
    " issue-7 --roots-only --summary --compact --output json`, then expand only what matters with"
    " `--thread <thread-id> --tail 30`. For `--since` incremental polling, pagination, and"
    " folding, see `multica issue comment list --help`.\n"
)

# A `command` agent that answers with what it was given: stdin, environment, directory.
ECHO_AGENT = """
import json, os, stat, sys
prompt = sys.stdin.read()
open({ran!r}, "a").write("ran\\n")
tmp = os.environ.get("TMPDIR", "")
report = {{
    "prompt": prompt,
    "env": dict(os.environ),
    "cwd": os.getcwd(),
    "tmp_mode": stat.S_IMODE(os.stat(tmp).st_mode) if tmp else 0,
}}
if "fail" in os.environ.get("EXTRA", ""):
    print(json.dumps({{"type": "error", "content": "segfault in the build"}}), flush=True)
    sys.exit(3)
print(json.dumps({{"type": "result", "output": json.dumps(report)}}))
"""

# A stand-in for Claude Code: answers `--version`, reads the stream-json prompt, reports argv.
FAKE_CLAUDE = """#!{python}
import json, os, stat, sys
if "--version" in sys.argv:
    print("2.1.0 (Claude Code)")
    sys.exit(0)
prompt = json.loads(sys.stdin.readline())["message"]["content"]
argv = sys.argv[1:]
path = argv[argv.index("--mcp-config") + 1] if "--mcp-config" in argv else ""
report = {{
    "argv": argv,
    "prompt": prompt,
    "mcp": json.load(open(path)) if path else None,
    "mcp_mode": stat.S_IMODE(os.stat(path).st_mode) if path else 0,
}}
print(json.dumps({{"type": "system", "subtype": "init", "session_id": "sess-1"}}), flush=True)
print(json.dumps({{"type": "result", "subtype": "success", "is_error": False,
                  "result": json.dumps(report), "session_id": "sess-1"}}), flush=True)
"""


def _echo_agent(tmp_path: Path) -> dict[str, str]:
    agent = tmp_path / "agent.py"
    agent.write_text(ECHO_AGENT.format(ran=str(tmp_path / "ran")))
    return {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(agent)}


def _multica_cli(tmp_path: Path) -> Path:
    """An installed `multica` executable in a directory of its own."""
    folder = tmp_path / "multica-bin"
    folder.mkdir()
    cli = folder / "multica"
    cli.write_text("#!/bin/sh\nexit 0\n")
    cli.chmod(0o755)
    return folder


def _exists(path: Path) -> bool:
    return path.exists()


def _found(root: Path, name: str) -> list[Path]:
    return list(root.rglob(name))


async def test_an_issue_task_gets_gos_prompt_and_environment(tmp_path: Path) -> None:
    """No prompt in the claim: the agent reads Go's issue prompt and gets the CLI's environment."""
    multica_dir = _multica_cli(tmp_path)
    base_env = {"PATH": f"/usr/bin:/bin:{multica_dir}"}
    custom = {"EXTRA": "kept", "MULTICA_TOKEN": "stolen", "HOME": "/elsewhere"}
    async with (
        multica_server() as fake,
        running_daemon(
            tmp_path, fake.url, base_env=base_env, health=True, **_echo_agent(tmp_path)
        ) as d,
    ):
        task_id = fake.queue_issue("issue-7", provider="command", agent={"custom_env": custom})
        task = await fake.finished(task_id)
        port = d.health_url.rsplit(":", 1)[1]
    assert task.status == "completed", task.error
    report = json.loads(task.output)
    assert report["prompt"] == ISSUE_PROMPT
    env = report["env"]
    assert env["MULTICA_TOKEN"] == task.auth_token and task.auth_token.startswith("mat_")
    assert env["MULTICA_SERVER_URL"] == fake.url
    assert (env["MULTICA_DAEMON_PORT"], env["MULTICA_TASK_SLOT"]) == (port, "0")
    assert (env["MULTICA_TASK_ID"], env["MULTICA_WORKSPACE_ID"]) == (task_id, fake.workspace_id)
    assert env["MULTICA_AGENT_ID"] == task.agent["id"]
    assert env["MULTICA_TASK_WORKSPACES_ROOT"] == str(tmp_path / "workspaces")
    assert env["PATH"].split(os.pathsep)[0] == str(multica_dir)
    assert env["EXTRA"] == "kept" and "HOME" not in env
    work = tmp_path / "workspaces" / fake.workspace_id / task_key(task_id) / "workdir"
    assert report["cwd"] == str(work) == task.work_dir
    temp = Path(env["TMPDIR"])
    assert env["TMP"] == env["TEMP"] == str(temp) and temp.parent == work.parent
    assert report["tmp_mode"] == 0o700 and not _exists(temp)
    brief = (work / "AGENTS.md").read_text()
    assert brief.startswith("# Multica Agent Runtime") and "multica issue get" in brief
    marker = json.loads((work / ".multica" / "daemon_task_context.json").read_text())
    assert marker == {
        "managed_by": "multica-daemon-task",
        "agent_id": task.agent["id"],
        "issue_id": "issue-7",
    }


async def test_a_token_that_is_not_task_scoped_runs_nothing(tmp_path: Path) -> None:
    """A claim whose token lacks `mat_` fails the task with a clear error; no agent starts."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, **_echo_agent(tmp_path)),
    ):
        task_id = fake.queue_issue(provider="command", auth_token="mul_personal_token")
        task = await fake.finished(task_id)
    assert task.status == "failed"
    assert task.error == "server provided an auth token that is not task-scoped"
    assert not (tmp_path / "ran").exists()


async def test_a_refused_start_runs_nothing_and_fails_the_task(tmp_path: Path) -> None:
    """A task cancelled between claim and start: `start` gets 400, nothing is spawned, and the
    daemon says `fail` with "start task failed: …" (which the server ignores, as Multica's)."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, **_echo_agent(tmp_path)),
    ):
        task_id = fake.queue_issue(provider="command")
        fake.cancel_when_claimed(task_id)
        await eventually(lambda: bool(fake.seen("fail")), within=30)
    (fail,) = fake.seen("fail")
    assert fail.body["error"].startswith("start task failed: start: ")
    assert "(HTTP 400)" in fail.body["error"]
    assert fail.body["failure_reason"] == ""
    assert [r.route for r in fake.seen("start")] == ["start"]
    assert not (tmp_path / "ran").exists()
    assert fake.tasks[task_id].status == "cancelled"


async def test_a_generic_failure_is_left_for_the_server_to_classify(tmp_path: Path) -> None:
    """An agent that crashes is reported with no reason; the server classifies the text."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, **_echo_agent(tmp_path)),
    ):
        task_id = fake.queue_issue(provider="command", agent={"custom_env": {"EXTRA": "fail"}})
        task = await fake.finished(task_id)
    (fail,) = fake.seen("fail")
    assert fail.body["failure_reason"] == ""
    assert task.status == "failed" and task.failure_reason in REASONS
    assert task.error.startswith("exit code 3")


async def test_a_follow_up_runs_in_the_prior_work_dir_and_resumes(tmp_path: Path) -> None:
    """The same agent on the same issue: the prior work dir is reused and its session resumed."""
    agent = {"id": str(uuid.uuid4())}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url):
        first = await fake.finished(fake.queue_issue("issue-9", agent=agent))
        (Path(first.work_dir) / "notes.txt").write_text("left by the first run")
        prior = {"prior_work_dir": first.work_dir, "prior_session_id": first.session_id}
        second = await fake.finished(fake.queue_issue("issue-9", agent=agent, **prior))
    assert second.status == "completed"
    assert second.work_dir == first.work_dir
    assert second.session_id == first.session_id
    assert "Session Continuity Notice" not in second.output
    assert (Path(second.work_dir) / "notes.txt").exists()


async def test_a_foreign_or_unmarked_prior_dir_is_not_reused(tmp_path: Path) -> None:
    """Another agent's directory, or one without the daemon's markers, is not run in: the task
    starts fresh in its own directory and the prompt says the session could not be restored."""
    agent = {"id": str(uuid.uuid4())}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url):
        first = await fake.finished(fake.queue_issue("issue-9", agent=agent))
        unmarked = tmp_path / "workspaces" / fake.workspace_id / "planted" / "workdir"
        unmarked.mkdir(parents=True)
        outcomes = []
        for prior_dir, owner in ((first.work_dir, {"id": str(uuid.uuid4())}), (unmarked, agent)):
            prior = {"prior_work_dir": str(prior_dir), "prior_session_id": first.session_id}
            task_id = fake.queue_issue("issue-9", agent=owner, **prior)
            outcomes.append((task_id, await fake.finished(task_id)))
    for task_id, task in outcomes:
        assert task.status == "completed"
        assert task.work_dir.endswith(f"/{task_key(task_id)}/workdir")
        assert task.session_id != first.session_id
        assert task.output.endswith(
            "## Session Continuity Notice\n\nThis run was meant to continue an earlier"
            " conversation, but that provider session could not be restored, so you are on a"
            " fresh one. The issue and its full comment history are unaffected — that record is"
            " the authoritative version of this conversation, and reading it (which your workflow"
            " already requires) reconstructs it. What is gone is only your own working memory"
            " from earlier turns: what you already tried, what you ruled out, and how far you had"
            " got. Re-derive what you need instead of assuming it, and do not claim continuity"
            " the record cannot back up. Do not open your reply by announcing this — raise it"
            " only where it actually matters, such as when the user refers to reasoning you"
            " never wrote down.\n\n"
        )


async def test_claude_gets_its_brief_skills_and_mcp_config(tmp_path: Path) -> None:
    """CLAUDE.md carries the brief, skills land in `.claude/skills`, and the MCP config is a
    0600 file passed with `--mcp-config` and `--strict-mcp-config`."""
    claude = tmp_path / "claude"
    claude.write_text(FAKE_CLAUDE.format(python=sys.executable))
    claude.chmod(0o755)
    mcp = {"mcpServers": {"docs": {"command": "docs-server", "args": ["--stdio"]}}}
    skills = [
        {
            "id": "s1",
            "name": "Issue Review",
            "content": "Review the issue carefully.",
            "files": [
                {"path": "checklists/a.md", "content": "- one"},
                {"path": "../../escape.md", "content": "no"},
            ],
        }
    ]
    options = {"MULTICA_CLAUDE_PATH": str(claude), "MULTICA_SCRIPTED_BACKEND": "0"}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **options):
        # Whole skills, as a server sends them without skill-bundles-v1: a file path that
        # would leave its skill can only arrive this way (a bundle with one is refused).
        fake.skills_by_reference = False
        agent = {
            "name": "Reviewer",
            "instructions": "Be terse.",
            "skills": skills,
            "mcp_config": mcp,
        }
        task_id = fake.queue_issue("issue-7", provider="claude", agent=agent)
        task = await fake.finished(task_id)
    assert task.status == "completed", task.error
    report = json.loads(task.output)
    assert report["prompt"] == ISSUE_PROMPT
    work = Path(task.work_dir)
    argv = report["argv"]
    config = argv[argv.index("--mcp-config") + 1]
    assert "--strict-mcp-config" in argv and "--append-system-prompt" not in argv
    assert Path(config) == work.parent / "mcp-config.json"
    assert (report["mcp"], report["mcp_mode"]) == (mcp, 0o600)
    brief = (work / "CLAUDE.md").read_text()
    assert "**You are: Reviewer**" in brief and "Be terse." in brief
    skill = work / ".claude" / "skills" / "issue-review"
    assert (skill / "SKILL.md").read_text() == (
        "---\nname: issue-review\n---\n\nReview the issue carefully."
    )
    assert (skill / "checklists" / "a.md").read_text() == "- one"
    assert not _found(tmp_path, "escape.md")
    assert stat.S_IMODE((work.parent / "mcp-config.json").stat().st_mode) == 0o600


async def test_tasks_running_at_once_get_their_own_slots(tmp_path: Path) -> None:
    """Two tasks claimed together see MULTICA_TASK_SLOT 0 and 1."""
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, **_echo_agent(tmp_path)),
    ):
        ids = [fake.queue_issue(provider="command") for _ in range(2)]
        tasks = [await fake.finished(task_id) for task_id in ids]
    slots = {json.loads(t.output)["env"]["MULTICA_TASK_SLOT"] for t in tasks}
    assert slots == {"0", "1"}


async def test_a_start_whose_answer_was_lost_still_runs(tmp_path: Path) -> None:
    """The server started the task but the answer was lost; the retry is refused (no longer
    `dispatched`), and the daemon, finding the task `running`, runs it rather than failing it."""
    fast = RetryPolicy((0.05, 0.1))
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, policy=fast, **_echo_agent(tmp_path)),
    ):
        fake.drop_answers("start")
        task_id = fake.queue_issue(provider="command")
        task = await fake.finished(task_id)
    assert task.status == "completed"
    assert [r.route for r in fake.seen("start")] == ["start", "start"]
    assert fake.seen("fail") == []
