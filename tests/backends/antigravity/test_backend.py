"""The Antigravity backend against a stand-in `agy`: stdout is the answer, the log file it
is given names the conversation, a provider error and its own print timeout."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from backends.antigravity import AntigravityBackend
from backends.antigravity.backend import go_duration
from backends.base import MessageType, RunStatus
from backends.claude.failure import CAPACITY
from tests.backends.support import drain, stdin_spec

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parents[2] / "fixtures" / "antigravity"
STAND_IN = Path(__file__).with_name("stand_in.py")
CONVERSATION = "b8b263a4-4b2f-4339-acc9-78b248e2b606"


def agy_at(tmp_path: Path) -> Path:
    path = tmp_path / "agy"
    path.write_text(f"#!{sys.executable}\n" + STAND_IN.read_text())
    path.chmod(0o755)
    return path


async def run_agy(tmp_path: Path, log: str, stdout: str, resume: str = "", **env: str):  # type: ignore[no-untyped-def]
    record = tmp_path / "argv.json"
    given = {"RECORD": str(record), "LOG_FIXTURE": str(FIXTURES / log), "STDOUT": stdout}
    spec = stdin_spec({**given, **env, "PATH": "/usr/bin"}, tmp_path / "work", resume=resume)
    async with AntigravityBackend(str(agy_at(tmp_path))).start(spec) as run:
        sent = await drain(run)
        result = await run.result()
    return sent, result, json.loads(record.read_text())


async def test_stdout_is_the_answer_and_the_log_names_the_conversation(tmp_path: Path) -> None:
    """Each line is text; the conversation to resume comes from the log; the run's log
    folder is gone afterwards."""
    sent, result, argv = await run_agy(tmp_path, "agy.log", "Counting.|There are 2 files.")
    assert [m.content for m in sent if m.type is MessageType.TEXT] == [
        "Counting.",
        "There are 2 files.",
    ]
    assert result.status is RunStatus.COMPLETED
    assert result.output == "Counting.\nThere are 2 files."
    assert result.session_id == CONVERSATION
    assert argv[:2] == ["-p", "Do the task."] and "--dangerously-skip-permissions" in argv
    assert argv[argv.index("--print-timeout") + 1] == "24h0m0s"
    assert argv[argv.index("--add-dir") + 1] == str(tmp_path / "work")
    assert not Path(argv[argv.index("--log-file") + 1]).parent.exists()


async def test_a_resumed_run_names_its_conversation(tmp_path: Path) -> None:
    """`--conversation ID` resumes."""
    _, _, argv = await run_agy(tmp_path, "agy.log", "ok", resume=CONVERSATION)
    assert argv[argv.index("--conversation") + 1] == CONVERSATION


async def test_a_logged_provider_error_fails_the_run_though_agy_exits_0(tmp_path: Path) -> None:
    """`agent executor error:` in the log fails the run, named by its words."""
    _, result, _ = await run_agy(tmp_path, "agy-error.log", "")
    assert result.status is RunStatus.FAILED and result.failure_reason == CAPACITY
    assert result.error.startswith("agy provider error: 429 Resource has been exhausted")


async def test_its_own_print_timeout_is_a_timeout(tmp_path: Path) -> None:
    """agy prints an error and exits 0 when its print timeout passes: the log tells."""
    _, result, _ = await run_agy(tmp_path, "agy-timeout.log", "Error: timed out")
    assert result.status is RunStatus.TIMEOUT


async def test_an_empty_answer_is_read_from_the_transcript(tmp_path: Path) -> None:
    """Empty stdout: the planner's settled answer after the last input, from the transcript
    under the app data directory the log names."""
    app = tmp_path / "appdata"
    logs = app / "brain" / CONVERSATION / ".system_generated" / "logs"
    logs.mkdir(parents=True)
    shutil.copy(FIXTURES / "transcript.jsonl", logs / "transcript.jsonl")
    _, result, _ = await run_agy(tmp_path, "agy.log", "", APPDATA=str(app))
    assert result.status is RunStatus.COMPLETED and result.output == "There are 2 files."


def test_durations_read_as_go_prints_them() -> None:
    """What agy's flag parser reads."""
    assert [go_duration(s) for s in (0.2, 45, 1200, 86400)] == ["1s", "45s", "20m0s", "24h0m0s"]
