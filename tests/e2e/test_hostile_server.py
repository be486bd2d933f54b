"""A hostile server cannot crash, flood or fool a running daemon: each answer it twists costs
that one call or round, and the daemon goes on claiming and running tasks."""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import pytest

from daemon.protocol import runtime_actions
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio

FAST = {"MULTICA_DAEMON_HEARTBEAT_INTERVAL": "100ms"}
DEEP = ("[" * 100_000 + "]" * 100_000).encode()
INFLATED = 48 << 20
"""Bytes a gzip bomb inflates to: past the daemon's 32 MiB answer cap."""

# A `command` agent that notes each start in a file, then works for a second.
SLOW_AGENT = """
import json, sys, time
sys.stdin.read()
open({ran!r}, "a").write("ran\\n")
time.sleep(1)
print(json.dumps({{"type": "result", "output": "done"}}))
"""


# A `command` agent that answers with the environment it was given.
ENV_AGENT = """
import json, os, sys
sys.stdin.read()
print(json.dumps({"type": "result", "output": json.dumps(dict(os.environ))}))
"""
HOOKS = {
    "LD_PRELOAD": "/tmp/evil.so",
    "LD_AUDIT": "/tmp/evil.so",
    "PYTHONPATH": "/tmp/evil",
    "PYTHONSTARTUP": "/tmp/evil.py",
    "BASH_ENV": "/tmp/evil.sh",
    "NODE_OPTIONS": "--require /tmp/evil.js",
    "PERL5OPT": "-Mevil",
    "IS_SANDBOX": "1",
    "NOTIFY_SOCKET": "/run/systemd/notify",
    "AGENT_DAEMON_TASK_ID": "someone-else",
}


def _slow_agent(tmp_path: Path) -> dict[str, str]:
    agent = tmp_path / "agent.py"
    agent.write_text(SLOW_AGENT.format(ran=str(tmp_path / "ran")))
    return {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(agent)}


async def _completes(fake: MulticaFake, task_id: str, within: float = 60.0) -> None:
    # A safety net: the whole test takes 8 s at load 17, a hostile answer costing CPU each time.
    await eventually(lambda: fake.tasks[task_id].status in ("completed", "failed"), within)
    assert fake.tasks[task_id].status == "completed", fake.tasks[task_id].error


async def test_json_nested_100000_deep_costs_one_answer_not_the_daemon(tmp_path: Path) -> None:
    """A control frame and heartbeat answers of `[[[...]]]` 100,000 levels deep are refused
    as malformed; the daemon keeps its control channel and still runs the next task."""
    async with multica_server() as fake:
        # Heartbeats stay on HTTP, where the deep answers are: the socket does not ack them.
        fake.ws_heartbeats = False
        async with running_daemon(tmp_path, fake.url, control=True, **FAST) as d:
            await eventually(lambda: bool(fake.watchers))
            fake.answer_raw("heartbeat", DEEP)
            fake.send_frame(DEEP.decode())
            malformed = {"endpoint": "heartbeat", "outcome": "malformed"}
            sample = d.metrics.registry.get_sample_value
            await eventually(
                lambda: (sample("agent_daemon_server_requests_total", malformed) or 0) >= 3
            )
            del fake.raw_answers["heartbeat"]
            task_id = fake.queue_issue()
            await _completes(fake, task_id)
            assert d.worker.status == "running"


async def test_a_task_id_claimed_again_runs_once(tmp_path: Path) -> None:
    """A server that hands out a running task again (twice in one claim, and in every later
    claim) gets one run of it: one agent, one `complete`, no `fail`."""
    async with multica_server() as fake:
        fake.repeat_claims = True
        async with running_daemon(
            tmp_path, fake.url, MULTICA_DAEMON_MAX_CONCURRENT_TASKS="4", **_slow_agent(tmp_path)
        ) as d:
            task_id = fake.queue_issue(provider="command")
            await _completes(fake, task_id)
            assert d.worker.status == "running"
    assert (tmp_path / "ran").read_text() == "ran\n"
    assert len(fake.seen("complete")) == 1 and fake.seen("fail") == []


async def test_a_compressed_answer_past_the_cap_is_refused_unread(tmp_path: Path) -> None:
    """A 64 KB gzip heartbeat answer that inflates past the answer cap is malformed (never
    inflated whole); heartbeats and claims go on."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    chunk = b"a" * (1 << 20)
    parts = [deflater.compress(b'{"status": "ok", "pad": "')]
    parts += [deflater.compress(chunk) for _ in range(INFLATED >> 20)]
    bomb = b"".join(parts) + deflater.compress(b'"}') + deflater.flush()
    assert len(bomb) < 200_000
    async with (
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, **FAST) as d,
    ):
        fake.answer_raw("heartbeat", bomb, headers={"content-encoding": "gzip"})
        malformed = {"endpoint": "heartbeat", "outcome": "malformed"}
        sample = d.metrics.registry.get_sample_value
        await eventually(
            lambda: (sample("agent_daemon_server_requests_total", malformed) or 0) >= 2
        )
        task_id = fake.queue_issue()
        await _completes(fake, task_id)


async def test_a_redirected_control_upgrade_is_never_followed(tmp_path: Path) -> None:
    """A 3xx on the control WebSocket's upgrade is a failed attempt: the address it names is
    never contacted (the token stays home), and the daemon claims by polling."""
    async with (
        multica_server() as elsewhere,
        multica_server() as fake,
        running_daemon(tmp_path, fake.url, control=True) as d,
    ):
        # The daemon's channel must be open first: asked for while its first upgrade is still
        # on its way (the server may have answered it, unredirected), a reconnect for the same
        # runtimes is no reconnect.
        channel = d.worker.pickup.channel
        assert channel is not None
        await eventually(
            lambda: channel.connected.is_set(), what="the daemon's control channel to open"
        )
        fake.control_redirect = elsewhere.url.replace("http", "ws") + "/api/daemon/ws"
        d.worker.pickup.runtimes_changed()  # reconnect now, to meet the redirect
        await eventually(lambda: len(fake.seen("ws-redirected")) >= 1)
        task_id = fake.queue_issue()
        await _completes(fake, task_id)
    assert elsewhere.requests == []


async def test_thousands_of_pending_actions_never_starve_claims(tmp_path: Path) -> None:
    """3,000 pending imports answered slowly by the server are taken up a few at a time,
    through at most `AT_ONCE` connections: a queued task is claimed and run meanwhile."""
    async with multica_server() as fake:
        fake.action_delay = 2.0
        fake.pending = {
            "pending_local_skill_imports": [
                {"id": f"i{n}", "skill_key": f"k{n}"} for n in range(3000)
            ]
        }
        async with running_daemon(tmp_path, fake.url, **FAST):
            await eventually(lambda: fake.actions_in_flight >= 1)
            task_id = fake.queue_issue()
            await _completes(fake, task_id, within=10)
            assert fake.most_actions_in_flight <= runtime_actions.AT_ONCE


async def test_custom_env_cannot_hook_the_agent_and_a_bad_name_is_invalid_input(
    tmp_path: Path,
) -> None:
    """Loader and interpreter hooks, IS_SANDBOX, the notify socket and the daemon's own names
    in `custom_env` never reach the agent; a name with `=` fails its task as invalid input
    (said so, not "internal error") and nothing starts."""
    agent = tmp_path / "env_agent.py"
    agent.write_text(ENV_AGENT)
    command = {"MULTICA_COMMAND_PATH": sys.executable, "MULTICA_COMMAND_ARGS": str(agent)}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **command):
        custom = {**HOOKS, "KEPT": "yes"}
        hooked = fake.queue_issue(provider="command", agent={"custom_env": custom})
        await _completes(fake, hooked)
        bad = fake.queue_issue(provider="command", agent={"custom_env": {"A=B": "1"}})
        await eventually(lambda: fake.tasks[bad].status == "failed")
    env = json.loads(fake.tasks[hooked].output)
    assert env["KEPT"] == "yes"
    assert sorted(set(HOOKS) & set(env)) == ["AGENT_DAEMON_TASK_ID"]
    assert env["AGENT_DAEMON_TASK_ID"] != "someone-else"
    assert fake.tasks[bad].error.startswith("invalid input: custom_env name 'A=B'")
