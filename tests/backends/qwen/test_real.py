"""The Qwen Code backend driving the real CLI against the fake Chat Completions API on
loopback: detection, a session resumed, a session it does not have replaced by a fresh one.

The whole-daemon scenarios (a tool under the watchdog, stalls, the kill) are in
tests/e2e/test_chat_cli_daemon.py. Skipped, with the install command as the reason, only when
the CLI is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import MessageType, RunStatus
from backends.qwen import QwenBackend
from backends.version import version_at_least
from tests.backends.support import drain, stdin_spec
from tests.fakes.chat_api import fake_chat, qwen_env
from tests.fakes.openai_api import Answer
from tests.fakes.real_cli import pinned_version, require_cli

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


@pytest.fixture
def qwen() -> QwenBackend:
    return QwenBackend(require_cli("qwen", "MULTICA_TEST_QWEN_PATH"))


async def test_detect_reports_the_pinned_version_which_is_new_enough(qwen: QwenBackend) -> None:
    """`detect` answers with the installed version, one the backend takes (Multica's floor,
    0.20.0, or newer)."""
    version = await qwen.detect()
    assert version == pinned_version("@qwen-code/qwen-code")
    assert version_at_least(version or "", QwenBackend.min_version)
    assert QwenBackend.min_version == "0.20.0"


async def test_a_session_resumes_and_an_unknown_one_starts_fresh(
    qwen: QwenBackend, tmp_path: Path
) -> None:
    """The second run continues the first one's session (the model sees the first answer);
    a run given a session Qwen Code does not have starts a fresh one in the same run,
    saying so."""
    script = [Answer("First."), Answer("Second."), Answer("Third.")]
    work = tmp_path / "work"
    async with fake_chat(script) as api:
        env = qwen_env(tmp_path / "agent", api.url)
        async with qwen.start(stdin_spec(env, work)) as run:
            await drain(run, 90)
            first = await run.result()
        async with qwen.start(stdin_spec(env, work, first.session_id)) as run:
            resumed = await drain(run, 90)
            second = await run.result()
        unknown = "11111111-2222-3333-4444-555555555555"
        async with qwen.start(stdin_spec(env, work, unknown)) as run:
            fresh = await drain(run, 90)
            third = await run.result()
    assert first.status is RunStatus.COMPLETED and first.session_id, first
    assert (second.status, second.output, second.session_id) == (
        RunStatus.COMPLETED,
        "Second.",
        first.session_id,
    )
    assert not any("fresh session" in m.content for m in resumed)
    main = api.main_requests()
    assert "First." in str(main[1].body)
    assert third.status is RunStatus.COMPLETED and third.output == "Third."
    assert third.session_id not in ("", first.session_id, unknown)
    notices = [m for m in fresh if m.type is MessageType.STATUS and "fresh" in m.content]
    assert len(notices) == 1
    assert "First." not in str(main[2].body)
