"""The Pi backend driving the real CLI against the fake Chat Completions API on loopback:
detection, usage, a session resumed in its work directory, a fresh one elsewhere.

The whole-daemon scenarios (a tool under the watchdog, stalls, the kill) are in
tests/e2e/test_pi_daemon.py. Skipped, with the install command as the reason, only when the
CLI is not installed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import MessageType, RunStatus, Usage
from backends.pi import PiBackend
from tests.backends.support import drain, stdin_spec
from tests.fakes.chat_api import MODEL, USAGE, fake_chat, pi_env
from tests.fakes.openai_api import Answer
from tests.fakes.real_cli import pinned_version, require_cli

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


@pytest.fixture
def pi() -> PiBackend:
    return PiBackend(require_cli("pi", "MULTICA_TEST_PI_PATH"))


async def test_detect_reports_the_pinned_version_and_any_is_taken(pi: PiBackend) -> None:
    """`detect` answers with the installed version; the backend asks for none (as Multica)."""
    version = await pi.detect()
    assert version == pinned_version("@mariozechner/pi-coding-agent")
    assert PiBackend.min_version == ""


async def test_a_session_resumes_in_its_work_dir_and_starts_fresh_elsewhere(
    pi: PiBackend, tmp_path: Path
) -> None:
    """The second run, in the first one's work directory, continues its session (the model
    sees the first answer); a third, elsewhere, cannot (Pi keeps sessions per directory) and
    starts a fresh one in the same run, saying so. Each reports the fake model's usage."""
    script = [Answer("First."), Answer("Second."), Answer("Third.")]
    async with fake_chat(script) as api:
        env = pi_env(tmp_path / "agent", api.url)
        async with pi.start(stdin_spec(env, tmp_path / "work")) as run:
            await drain(run, 60)
            first = await run.result()
        resume = first.session_id
        async with pi.start(stdin_spec(env, tmp_path / "work", resume)) as run:
            resumed = await drain(run, 60)
            second = await run.result()
        async with pi.start(stdin_spec(env, tmp_path / "elsewhere", resume)) as run:
            elsewhere = await drain(run, 60)
            third = await run.result()
    assert first.status is RunStatus.COMPLETED and first.session_id
    assert first.usage == (
        Usage(
            "pi",
            MODEL,
            input_tokens=USAGE["prompt_tokens"] - USAGE["cached_tokens"],
            output_tokens=USAGE["completion_tokens"],
            cache_read_tokens=USAGE["cached_tokens"],
        ),
    )
    assert (second.status, second.output, second.session_id) == (
        RunStatus.COMPLETED,
        "Second.",
        first.session_id,
    )
    assert not any("fresh session" in m.content for m in resumed)
    assert "First." in str(api.main_requests()[1].body)
    assert third.status is RunStatus.COMPLETED and third.output == "Third."
    assert third.session_id not in ("", first.session_id)
    notices = [m for m in elsewhere if m.type is MessageType.STATUS and "fresh" in m.content]
    assert len(notices) == 1
    assert "First." not in str(api.main_requests()[2].body)
