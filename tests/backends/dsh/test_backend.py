"""The DeepSeek Harness backend against a stand-in `dsh`: offered only when the Multica
profile answers its probe; one execute command on stdin, closed after the result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from backends.base import RunStatus
from backends.dsh import DshBackend
from backends.dsh.backend import mcp_servers, model_selection
from tests.backends.support import drain, stdin_spec

pytestmark = pytest.mark.anyio

STAND_IN = Path(__file__).with_name("stand_in.py")


def dsh_at(tmp_path: Path) -> Path:
    path = tmp_path / "dsh"
    path.write_text(f"#!{sys.executable}\n" + STAND_IN.read_text())
    path.chmod(0o755)
    return path


async def test_detection_needs_the_profiles_probe(tmp_path: Path) -> None:
    """A dsh whose probe answers is found with its version; one without the profile is not."""
    path = dsh_at(tmp_path)
    assert await DshBackend(str(path), detect_env={"PATH": "/usr/bin"}).detect() == "dsh 0.1.5-rc.2"
    bare = DshBackend(str(path), detect_env={"PATH": "/usr/bin", "PROBE": "none"})
    assert await bare.detect() is None and bare.version == ""


async def test_a_run_sends_one_execute_command_and_closes_stdin_after_the_result(
    tmp_path: Path,
) -> None:
    """The command carries the request id, directory, prompt and model; the process exits
    only because stdin closes after the result, and the run completes."""
    record = tmp_path / "record.jsonl"
    backend = DshBackend(str(dsh_at(tmp_path)), model="deepseek-official/deepseek-v4-flash")
    spec = stdin_spec({"RECORD": str(record), "PATH": "/usr/bin"}, tmp_path / "work")
    async with backend.start(spec) as run:
        await drain(run)
        result = await run.result()
    assert result.status is RunStatus.COMPLETED and result.output == "hi"
    assert result.session_id == "new-1" and result.exit_code == 0
    (sent,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert sent["command"]["prompt"] == "Do the task."
    assert sent["command"]["cwd"] == str(tmp_path / "work")
    assert sent["command"]["model"] == {"provider": "deepseek-official", "id": "deepseek-v4-flash"}
    assert "resume_session_id" not in sent["command"]


async def test_a_rejected_resume_starts_a_fresh_session(tmp_path: Path) -> None:
    """dsh refuses the session: a second process, without the session, answers."""
    record = tmp_path / "record.jsonl"
    spec = stdin_spec({"RECORD": str(record), "PATH": "/usr/bin"}, tmp_path / "w", resume="gone")
    async with DshBackend(str(dsh_at(tmp_path))).start(spec) as run:
        sent = await drain(run)
        result = await run.result()
    assert result.status is RunStatus.COMPLETED and result.session_id == "new-1"
    assert any("gone" in m.content for m in sent)
    commands = [json.loads(line)["command"] for line in record.read_text().splitlines()]
    assert [c.get("resume_session_id") for c in commands] == ["gone", None]


def test_models_are_provider_slash_id_and_mcp_servers_are_dshs_list() -> None:
    """`provider/id` with escapes; anything else is refused. stdio and HTTP servers."""
    assert model_selection("my%2Fgw/deepseek-v4") == {"provider": "my/gw", "id": "deepseek-v4"}
    assert model_selection("") is None
    with pytest.raises(ValueError, match="provider/model"):
        model_selection("deepseek-v4")
    config = {
        "mcpServers": {
            "b": {"url": "http://127.0.0.1:9/mcp", "headers": {"X": "1"}},
            "a": {"command": "node", "args": ["s.js"], "env": {"K": "v"}},
        }
    }
    assert mcp_servers(config) == [
        {"name": "a", "transport": "stdio", "command": "node", "args": ["s.js"], "env": {"K": "v"}},
        {"name": "b", "transport": "streamable-http", "url": "http://127.0.0.1:9/mcp",
         "headers": {"X": "1"}},
    ]  # fmt: skip
