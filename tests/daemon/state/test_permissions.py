"""The daemon's state is owner-only (0700 directories, 0600 files) whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.files.private import path_part, write_atomic
from daemon.ops.metrics import Metrics
from daemon.protocol.reports import TerminalReport
from daemon.state.agent_records import AgentRecord, AgentRecords
from daemon.state.incidents import Incident, IncidentLog
from daemon.state.outbox import Leftover, Outbox
from tests.helpers import embedded_server, running_daemon

pytestmark = pytest.mark.anyio


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask: whatever the daemon creates keeps exactly its own mode."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


@pytest.mark.usefixtures("open_umask")
async def test_a_daemon_run_creates_only_owner_only_state(tmp_path: Path) -> None:
    """State, outbox, agents and workspaces directories are 0700; server.db and daemon_id 0600."""
    state = tmp_path / "state"
    async with (
        embedded_server(state / "server.db") as url,
        running_daemon(tmp_path, url) as d,
    ):
        task_id = await d.submit({"steps": [{"text": "hi"}, {"result": {"output": "ok"}}]})
        assert (await d.wait(task_id))["status"] == "completed"
    dirs = [state, state / "outbox", state / "agents", tmp_path / "workspaces"]
    dirs += [p for p in (tmp_path / "workspaces").rglob("*") if p.is_dir()]
    files = [state / "server.db", tmp_path / ".multica" / "daemon.id"]
    files += [p for p in state.glob("server.db-*")]
    assert {str(p): mode(p) for p in dirs} == {str(p): "0o700" for p in dirs}
    assert {str(p): mode(p) for p in files} == {str(p): "0o600" for p in files}


@pytest.mark.usefixtures("open_umask")
def test_reports_records_and_incidents_are_written_owner_only(tmp_path: Path) -> None:
    """An outbox file, an agent record and timeouts.jsonl are 0600 in 0700 directories."""
    outbox = Outbox(tmp_path / "state" / "outbox", Metrics())
    report = TerminalReport(kind="complete", output="secret result")
    outbox.put(Leftover(task_id="t1", report=report))
    AgentRecords(tmp_path / "state" / "agents").put(AgentRecord("t1", "scripted", pid=4242))
    incident = Incident("t1", "idle", 1.0, 2.0, "text", 0, "fail", None)
    IncidentLog(tmp_path / "state" / "timeouts.jsonl").record(incident)
    files = [
        tmp_path / "state" / "outbox" / "t1.json",
        tmp_path / "state" / "agents" / "t1.json",
        tmp_path / "state" / "timeouts.jsonl",
    ]
    assert [mode(p) for p in files] == ["0o600"] * 3
    assert [mode(p.parent) for p in files] == ["0o700"] * 3


def test_an_atomic_write_replaces_the_whole_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    """A rewrite replaces the content whole; the temporary file is renamed away."""
    path = tmp_path / "f.json"
    write_atomic(path, "x" * 1000)
    write_atomic(path, "short")
    assert path.read_text() == "short"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_path_parts_never_collide_and_never_leave_the_directory() -> None:
    """`a.b` and `a_b` get two names; separators and dot-dot are escaped; long ids are cut."""
    names = [path_part(t) for t in ("a.b", "a_b", "../x", "a/b", "", "%", "é", "x" * 300)]
    assert len(set(names)) == len(names)
    assert all("/" not in n and n not in (".", "..") and len(n) <= 120 for n in names)
    assert path_part("0b1c2d3e-0000-4000-8000-000000000000") == (
        "0b1c2d3e-0000-4000-8000-000000000000"
    )
