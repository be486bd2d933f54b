"""Agents of every backend, and the version probe, start as the agent user: its uid, gid and
groups, its HOME, USER and LOGNAME (real processes and a user made for the test: those tests
are marked `root` and fail without it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from backends.base import Backend, RunSpec
from backends.claude import ClaudeBackend
from backends.codex import CodexBackend
from backends.command import CommandBackend
from backends.process.identity import AgentUser

pytestmark = pytest.mark.anyio
AS_ROOT = pytest.mark.root

# Prints who it runs as, as one line-protocol result (and as plain text lines for the CLIs'
# parsers, which the test does not need: it reads the file the script writes).
WHOAMI = """#!/bin/sh
out="$(pwd)/whoami.json"
printf '{"uid": %s, "gid": %s, "groups": "%s", "home": "%s", "user": "%s", "logname": "%s",' \
    "$(id -u)" "$(id -g)" "$(id -G)" "$HOME" "$USER" "$LOGNAME" > "$out"
printf ' "xdg": "%s", "sandbox": "%s"}\\n' "${XDG_CONFIG_HOME-}" "${IS_SANDBOX-}" >> "$out"
printf '{"type": "result", "output": "ok"}\\n'
"""


def whoami_script(passable_tmp: Path) -> Path:
    script = passable_tmp / "whoami"
    script.write_text(WHOAMI)
    script.chmod(0o755)
    return script


def agent_workdir(passable_tmp: Path, agent_user: AgentUser) -> Path:
    work = passable_tmp / "work"
    work.mkdir()
    os.chown(work, agent_user.uid, agent_user.gid)
    return work


def backends(script: Path) -> list[Backend]:
    """Each way a backend builds its process: Claude's, Codex's, the line protocol's."""
    return [
        ClaudeBackend(str(script), is_root=True),
        CodexBackend(str(script)),
        CommandBackend(str(script)),
    ]


@AS_ROOT
@pytest.mark.parametrize("index", [0, 1, 2], ids=["claude", "codex", "command"])
async def test_every_backend_starts_its_agent_as_the_agent_user(
    agent_user: AgentUser, passable_tmp: Path, index: int
) -> None:
    """The agent's uid, gid and groups are the user's, HOME/USER/LOGNAME come from the
    password database, the daemon user's XDG directories are gone, and Claude Code is not
    told IS_SANDBOX (it runs unprivileged)."""
    backend = backends(whoami_script(passable_tmp))[index]
    work = agent_workdir(passable_tmp, agent_user)
    env = {"PATH": "/usr/bin:/bin", "HOME": "/root", "USER": "root", "XDG_CONFIG_HOME": "/x"}
    spec = RunSpec(prompt="who", workdir=work, env=env, user=agent_user, task_id=f"id-{index}")
    async with backend.start(spec) as run:
        async for _ in run.messages():
            pass
        await run.result()
    seen = json.loads((work / "whoami.json").read_text())
    assert (seen["uid"], seen["gid"]) == (agent_user.uid, agent_user.gid)
    assert sorted(int(g) for g in seen["groups"].split()) == sorted(agent_user.groups)
    assert (seen["home"], seen["user"], seen["logname"]) == (
        agent_user.home,
        agent_user.name,
        agent_user.name,
    )
    assert (seen["xdg"], seen["sandbox"]) == ("", "")
    assert (work / "whoami.json").stat().st_uid == agent_user.uid


@AS_ROOT
async def test_claudes_long_instructions_file_is_readable_by_the_agent_user(
    agent_user: AgentUser, passable_tmp: Path
) -> None:
    """Instructions too long for argv go in a file the agent user can read (it is made by the
    daemon, as root, and handed over)."""
    script = passable_tmp / "reader"
    script.write_text(
        '#!/bin/sh\nfor a; do [ "$prev" = --append-system-prompt-file ] && '
        'head -c 9 "$a" > "$(pwd)/seen"; prev="$a"; done\n'
    )
    script.chmod(0o755)
    work = agent_workdir(passable_tmp, agent_user)
    spec = RunSpec(
        prompt="read",
        workdir=work,
        env={"PATH": "/usr/bin:/bin"},
        user=agent_user,
        instructions="remember " * 20_000,
    )
    async with ClaudeBackend(str(script), is_root=True).start(spec) as run:
        async for _ in run.messages():
            pass
        await run.result()
    assert (work / "seen").read_text() == "remember "


@AS_ROOT
async def test_without_an_agent_user_a_root_claude_is_told_it_is_sandboxed(
    passable_tmp: Path,
) -> None:
    """As root with no agent user, the same script sees IS_SANDBOX=1 and root's own ids."""
    work = passable_tmp / "work"
    work.mkdir()
    spec = RunSpec(prompt="who", workdir=work, env={"PATH": "/usr/bin:/bin", "HOME": "/root"})
    async with ClaudeBackend(str(whoami_script(passable_tmp)), is_root=True).start(spec) as run:
        async for _ in run.messages():
            pass
        await run.result()
    seen = json.loads((work / "whoami.json").read_text())
    assert (seen["uid"], seen["sandbox"], seen["home"]) == (os.geteuid(), "1", "/root")


@AS_ROOT
@pytest.mark.parametrize("kind", [ClaudeBackend, CodexBackend])
async def test_the_version_probe_runs_as_the_agent_user(
    agent_user: AgentUser, passable_tmp: Path, kind: type[ClaudeBackend | CodexBackend]
) -> None:
    """`detect` runs `<cli> --version` as the agent user, without the daemon's variables
    (the CLI is the agent's code: it never runs as root)."""
    probe = passable_tmp / "probe"
    probe.write_text('#!/bin/sh\necho "$(id -u).$(id -g).${#MULTICA_DAEMON_TOKEN} (${HOME})"\n')
    probe.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "MULTICA_DAEMON_TOKEN": "secret"}
    backend = kind(str(probe), detect_env=env, detect_as=agent_user)
    line = await backend.detect()
    assert line == f"{agent_user.uid}.{agent_user.gid}.0 ({agent_user.home})"


def test_the_environment_is_the_users_and_idempotent() -> None:
    """HOME, USER and LOGNAME become the user's; the daemon user's XDG directories go; the
    rest stays, and applying it twice changes nothing."""
    user = AgentUser("agent", 10001, 10002, (10002, 27), "/home/agent")
    env = {"HOME": "/root", "USER": "root", "XDG_RUNTIME_DIR": "/run/user/0", "PATH": "/bin"}
    mine = user.environ(env)
    expected = {"HOME": "/home/agent", "USER": "agent", "LOGNAME": "agent", "PATH": "/bin"}
    assert mine == expected and user.environ(mine) == mine


def test_the_spawn_always_names_the_groups() -> None:
    """uid, gid and the supplementary groups, even an empty list: left out, the child would
    keep the daemon's own (root's) groups under the new uid."""
    assert AgentUser("a", 5, 6, (), "/h").spawn_options() == {
        "user": 5,
        "group": 6,
        "extra_groups": [],
    }
