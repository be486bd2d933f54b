"""The Oh-My-Pi backend driving the real CLI (npm `@oh-my-pi/pi-coding-agent`) against the
fake Chat Completions API on loopback: its version, a session resumed in its work directory
or, once gone, replaced by a fresh one, and its model catalog.

The whole-daemon scenarios (a tool under the watchdog, stalls, the kill) are in
tests/e2e/test_chat_cli_daemon.py. Skipped, with the install command as the reason, only when
the CLI is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backends.base import MessageType, RunStatus, Usage
from backends.models import qualified, valid_thinking
from backends.omp import OmpBackend
from tests.backends.support import drain, stdin_spec
from tests.fakes.chat_api import MODEL, PROVIDER, USAGE, fake_chat, omp_env
from tests.fakes.openai_api import Answer
from tests.fakes.real_cli import pinned_version, require_cli

pytestmark = [pytest.mark.anyio, pytest.mark.real_cli]


@pytest.fixture
def omp() -> OmpBackend:
    return OmpBackend(require_cli("omp", "MULTICA_TEST_OMP_PATH"))


async def test_a_session_resumes_and_a_gone_one_is_replaced(
    omp: OmpBackend, tmp_path: Path
) -> None:
    """The second run continues the first one's session (the model sees the first answer);
    a third, naming a session omp does not have, starts a fresh one in the same run and says
    so. Usage is omp's, per model."""
    script = [Answer("First."), Answer("Second."), Answer("Third.")]
    async with fake_chat(script) as api:
        env = omp_env(tmp_path / "agent", api.url)
        assert await OmpBackend(omp.path, detect_env=env).detect() == (
            "omp/" + pinned_version("@oh-my-pi/pi-coding-agent")
        )
        async with omp.start(stdin_spec(env, tmp_path / "work")) as run:
            await drain(run, 60)
            first = await run.result()
        async with omp.start(stdin_spec(env, tmp_path / "work", first.session_id)) as run:
            await drain(run, 60)
            second = await run.result()
        gone = "0000dead-0000-7000-8000-000000000000"
        async with omp.start(stdin_spec(env, tmp_path / "work", gone)) as run:
            replaced = await drain(run, 60)
            third = await run.result()
    assert first.status is RunStatus.COMPLETED and first.output == "First."
    assert first.usage == (
        Usage(
            "omp",
            MODEL,
            input_tokens=USAGE["prompt_tokens"] - USAGE["cached_tokens"],
            output_tokens=USAGE["completion_tokens"],
            cache_read_tokens=USAGE["cached_tokens"],
        ),
    )
    assert (second.output, second.session_id) == ("Second.", first.session_id)
    assert "First." in str(api.main_requests()[1].body)
    assert third.status is RunStatus.COMPLETED and third.output == "Third."
    assert third.session_id not in ("", gone, first.session_id)
    notices = [m for m in replaced if m.type is MessageType.STATUS and "fresh" in m.content]
    assert len(notices) == 1


async def test_the_catalog_is_omps_models_json_by_selector(tmp_path: Path) -> None:
    """`omp models --json`: each model by its `provider/id` selector, labelled by its name,
    grouped by provider, with no thinking levels even for a reasoning model (as Multica), so
    a level for it is dropped; the bare id named in a task is completed to the selector."""
    env = omp_env(tmp_path / "agent", "http://127.0.0.1:9")
    listed = tmp_path / "agent" / "home" / ".omp" / "agent" / "models.json"
    config = json.loads(listed.read_text())
    config["providers"][PROVIDER]["models"].append(
        {"id": "deep", "name": "Deep", "reasoning": True}
    )
    listed.write_text(json.dumps(config))
    backend = OmpBackend(require_cli("omp", "MULTICA_TEST_OMP_PATH"), detect_env=env)
    catalog = await backend.models()
    # In omp's order (18.2.3 sorts its list).
    assert catalog.result()["models"] == [
        {"id": f"{PROVIDER}/deep", "label": "Deep", "provider": PROVIDER},
        {"id": f"{PROVIDER}/{MODEL}", "label": MODEL, "provider": PROVIDER},
    ]
    assert not valid_thinking(catalog, "omp", f"{PROVIDER}/deep", "high")
    assert qualified(catalog, "deep") == f"{PROVIDER}/deep"
