"""Model lists and thinking levels against the Multica-faithful server: a model-list request
(`pending_model_list`, pushed with `daemon:pending_work`) is answered within seconds with the
catalog the runtime's CLI gives, kept a minute; a task's thinking level reaches the CLI when
its model takes it, and is dropped, with a warning, when it does not.

The OpenCode runs drive the real CLI offline against the fake Chat Completions API, its one
model configured with reasoning variants: the level reaches the model request as OpenCode
sends it (`reasoning_effort`). The Claude and CodeBuddy runs use a stand-in CLI that notes
its arguments.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
import pytest

from backends.acp import AcpBackend
from backends.codex import CodexBackend
from backends.opencode import OPENCODE
from tests.backends.codebuddy.test_models import SESSION, acp_answers
from tests.fakes.agent_cli import CLAUDE_ANSWER, runs_of, write_cli
from tests.fakes.chat_api import MODEL, PROVIDER, fake_chat, opencode_env
from tests.fakes.multica_server import MulticaFake, multica_server
from tests.fakes.openai_api import Answer, codex_env, codex_home, fake_openai
from tests.fakes.real_cli import require_cli
from tests.helpers import eventually, running_daemon

pytestmark = pytest.mark.anyio

HELP = "  --effort <level>   Effort level for the current session (low, medium, high, xhigh, max)"
CONTROL = {"MULTICA_DAEMON_HEARTBEAT_INTERVAL": "30s", "MULTICA_SCRIPTED_BACKEND": "0"}


def with_variants(config: Path) -> None:
    """The fake model as a reasoning model with two variants in OpenCode's configuration."""
    written = json.loads(config.read_text())
    variants = {"low": {"reasoningEffort": "low"}, "high": {"reasoningEffort": "high"}}
    written["provider"][PROVIDER]["models"][MODEL].update(variants=variants, reasoning=True)
    config.write_text(json.dumps(written))


def result_of(fake: MulticaFake, request_id: str) -> dict[str, object]:
    (result,) = [r for r in fake.action_results if r["request_id"] == request_id]
    return result


async def test_a_model_list_is_answered_at_once_and_kept_a_minute(tmp_path: Path) -> None:
    """Pushed with `pending_work` (heartbeats 30 s apart), the request is answered within
    seconds with Claude Code's models and the `--effort` levels its `--help` names per model;
    a second request within the minute is answered without running the CLI again."""
    cli = write_cli(tmp_path / "claude", "2.1.332 (Claude Code)", CLAUDE_ANSWER, help_text=HELP)
    env = {**CONTROL, "MULTICA_CLAUDE_PATH": str(cli)}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, control=True, **env):
        (runtime,) = fake.live_runtimes()
        await eventually(lambda: bool(fake.watchers))
        first = fake.request_models(runtime.id)
        with anyio.fail_after(20):
            await eventually(lambda: any(r["request_id"] == first for r in fake.action_results))
        second = fake.request_models(runtime.id)

        def answered() -> bool:
            # The page asked again: pushed heartbeats of a runtime are one a second at most.
            fake.push_pending_work(runtime.id)
            return any(r["request_id"] == second for r in fake.action_results)

        await eventually(answered, every=0.2)
    answer = result_of(fake, first)
    assert (answer["status"], answer["supported"], answer["fallback"]) == ("completed", True, False)
    models = {m["id"]: m for m in answer["models"]}  # type: ignore[attr-defined]
    assert models["claude-sonnet-4-6"]["default"] is True
    levels = {
        k: [lvl["value"] for lvl in m["thinking"]["supported_levels"]] for k, m in models.items()
    }
    assert levels["claude-opus-4-7"] == ["low", "medium", "high", "xhigh", "max"]
    assert levels["claude-sonnet-4-6"] == ["low", "medium", "high", "max"]
    assert levels["claude-haiku-4-5-20251001"] == ["low", "medium", "high"]
    assert models["claude-opus-4-7"]["thinking"]["default_level"] == "medium"
    assert result_of(fake, second)["models"] == answer["models"]
    assert sum(1 for run in runs_of(cli) if run == ["--help"]) == 1


async def test_a_thinking_level_reaches_claude_only_where_its_model_takes_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`--effort xhigh` for Opus, which takes it; for Sonnet, which does not, the task runs
    on the CLI's default effort and the daemon says why."""
    cli = write_cli(tmp_path / "claude", "2.1.332 (Claude Code)", CLAUDE_ANSWER, help_text=HELP)
    env = {**CONTROL, "MULTICA_CLAUDE_PATH": str(cli)}
    caplog.set_level(logging.WARNING, "daemon.task.setup.model_choice")
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, **env):
        for model in ("claude-opus-4-7", "claude-sonnet-4-6"):
            agent = {"model": model, "thinking_level": "xhigh"}
            task_id = fake.queue_issue(provider="claude", agent=agent)
            assert (await fake.finished(task_id)).status == "completed"
    opus, sonnet = [run for run in runs_of(cli) if "-p" in run]
    assert opus[opus.index("--effort") + 1] == "xhigh"
    assert "--effort" not in sonnet
    assert "thinking level 'xhigh' does not fit claude model 'claude-sonnet-4-6'" in caplog.text


async def test_codebuddy_lists_its_own_models_and_takes_the_efforts_its_flag_does(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """CodeBuddy's model list is its ACP session's catalog (not Claude Code's), every model
    with the levels `--effort` takes; a task's `xhigh` reaches the CLI as `--effort xhigh`,
    and `enabled` — advertised by the session, refused by the flag — is dropped with a
    warning, the task running on CodeBuddy's default."""
    cli = write_cli(tmp_path / "codebuddy", "2.130.0", acp_answers(SESSION))
    env = {**CONTROL, "MULTICA_CODEBUDDY_PATH": str(cli)}
    caplog.set_level(logging.WARNING, "daemon.task.setup.model_choice")
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, control=True, **env):
        (runtime,) = fake.live_runtimes()
        await eventually(lambda: bool(fake.watchers))
        request = fake.request_models(runtime.id)
        await eventually(lambda: any(r["request_id"] == request for r in fake.action_results))
        # The catalog is kept a minute: the tasks' checks read it, not the CLI.
        write_cli(cli, "2.130.0", CLAUDE_ANSWER)
        for level in ("xhigh", "enabled"):
            agent = {"model": "glm-5.2", "thinking_level": level}
            task_id = fake.queue_issue(provider="codebuddy", agent=agent)
            assert (await fake.finished(task_id)).status == "completed"
    answer = result_of(fake, request)
    assert (answer["status"], answer["fallback"]) == ("completed", False)
    models = {m["id"]: m for m in answer["models"]}  # type: ignore[attr-defined]
    assert list(models) == ["hy3", "glm-5.2", "kimi-k3-1", "deepseek-v3-2-volc", "mystery-1"]
    assert models["glm-5.2"]["provider"] == "zhipu"
    levels = [lvl["value"] for lvl in models["glm-5.2"]["thinking"]["supported_levels"]]
    assert levels == ["low", "high", "xhigh"]
    applied, dropped = [run for run in runs_of(cli) if "-p" in run]
    assert applied[applied.index("--effort") + 1] == "xhigh"
    assert applied[applied.index("--model") + 1] == "glm-5.2"
    assert "--effort" not in dropped
    assert "thinking level 'enabled' does not fit codebuddy model 'glm-5.2'" in caplog.text


@pytest.mark.real_cli
async def test_opencode_lists_its_variants_and_runs_the_level_asked_for(tmp_path: Path) -> None:
    """The real OpenCode: its catalog (`opencode models`) lists the fake model with its
    reasoning variants as thinking levels; a task asking for `high` on it (the model named
    bare, completed from the catalog) reaches the model API as `reasoning_effort: high`; one
    asking for a level the model does not have runs on OpenCode's default."""
    path = require_cli("opencode", "MULTICA_TEST_OPENCODE_PATH")
    async with fake_chat([Answer("High."), Answer("Plain.")]) as api:
        agent_env = opencode_env(tmp_path / "agent", api.url)
        with_variants(Path(agent_env["OPENCODE_CONFIG"]))
        backend = AcpBackend(OPENCODE, path, detect_env=agent_env)
        found = {"opencode": (backend, "test")}
        env = {**CONTROL, "MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT": "120s"}
        async with (
            multica_server() as fake,
            running_daemon(
                tmp_path, fake.url, base_env=agent_env, backends=found, control=True, **env
            ),
        ):
            (runtime,) = fake.live_runtimes()
            await eventually(lambda: bool(fake.watchers))
            request = fake.request_models(runtime.id)
            await eventually(
                lambda: any(r["request_id"] == request for r in fake.action_results), within=60
            )
            high = fake.queue_issue(
                provider="opencode", agent={"model": MODEL, "thinking_level": "high"}
            )
            assert (await fake.finished(high, within=180)).status == "completed"
            plain = fake.queue_issue(
                provider="opencode", agent={"model": MODEL, "thinking_level": "max"}
            )
            assert (await fake.finished(plain, within=180)).status == "completed"
    models = {m["id"]: m for m in result_of(fake, request)["models"]}  # type: ignore[attr-defined]
    ours = models[f"{PROVIDER}/{MODEL}"]
    assert [lvl["value"] for lvl in ours["thinking"]["supported_levels"]] == [
        "low",
        "medium",
        "high",
    ]
    first, second = api.main_requests()
    assert first.body.get("reasoning_effort") == "high"
    # Dropped, the session keeps OpenCode's own default: its first variant.
    assert second.body.get("reasoning_effort") == "low"


async def test_a_codex_service_tier_goes_to_a_model_that_has_it(tmp_path: Path) -> None:
    """Codex's catalog names `priority` for one model and not the other: the first task's CLI
    gets the tier and its Fast feature, the second's neither; a level is never given to
    Codex's default model (its configuration picks it)."""
    catalog = {
        "models": [
            {
                "slug": "gpt-fast",
                "display_name": "Fast one",
                "visibility": "list",
                "default_reasoning_level": "low",
                "supported_reasoning_levels": [{"effort": "low"}, {"effort": "high"}],
                "service_tiers": [{"id": "priority", "name": "Fast"}],
            },
            {"slug": "gpt-slow", "visibility": "list", "supported_reasoning_levels": []},
            {"slug": "gpt-hidden", "visibility": "hide"},
        ]
    }
    codex_done = (
        json.dumps({"type": "thread.started", "thread_id": "t1"}),
        json.dumps({"type": "turn.completed", "usage": {}}),
    )
    cli = tmp_path / "codex"
    write_cli(cli, "codex-cli 0.171.0", [json.dumps(catalog)])
    env = {**CONTROL, "MULTICA_CODEX_PATH": str(cli)}
    async with multica_server() as fake, running_daemon(tmp_path, fake.url, control=True, **env):
        (runtime,) = fake.live_runtimes()
        await eventually(lambda: bool(fake.watchers))
        request = fake.request_models(runtime.id)
        await eventually(lambda: any(r["request_id"] == request for r in fake.action_results))
        write_cli(cli, "codex-cli 0.171.0", codex_done)
        tasks = [
            fake.queue_issue(
                provider="codex",
                agent={"model": m, "service_tier": "priority", "thinking_level": t},
            )
            for m, t in (("gpt-fast", "high"), ("gpt-slow", "high"), ("", "high"))
        ]
        for task_id in tasks:
            await fake.finished(task_id)
    models = result_of(fake, request)["models"]
    assert [m["id"] for m in models] == ["gpt-fast", "gpt-slow"]  # type: ignore[attr-defined]
    assert models[0]["service_tiers"] == [{"id": "priority", "name": "Fast"}]  # type: ignore[index]
    runs = [run for run in runs_of(cli) if run[:1] == ["exec"]]
    # The three run at once: each is known by its model.
    (fast,) = [run for run in runs if "gpt-fast" in run]
    (slow,) = [run for run in runs if "gpt-slow" in run]
    (default,) = [run for run in runs if "gpt-fast" not in run and "gpt-slow" not in run]
    assert 'service_tier="priority"' in fast and "fast_mode" in fast
    assert 'model_reasoning_effort="high"' in fast
    assert not any("service_tier" in a or "reasoning_effort" in a for a in slow + default)


@pytest.mark.real_cli
@pytest.mark.parametrize("mode", ["exec", "app-server"])
async def test_codex_sends_the_effort_and_tier_its_catalog_offers(
    tmp_path: Path, mode: str
) -> None:
    """The real Codex: a task on a model its bundled catalog gives `priority` and `high`
    reaches the model API with both (`service_tier`, `reasoning.effort`), in either mode."""
    path = require_cli("codex", "MULTICA_TEST_CODEX_PATH")
    async with fake_openai([Answer("Fast.")]) as api:
        agent_env = codex_env(tmp_path / "home", codex_home(tmp_path / "codex-home", api.url))
        backend = CodexBackend(path, detect_env=agent_env, mode=mode)
        found = {"codex": (backend, await backend.detect() or "")}
        catalog = (await backend.models()).models
        model = next(m for m in catalog if any(t.id == "priority" for t in m.service_tiers))
        assert model.thinking is not None and model.thinking.offers("high")
        async with (
            multica_server() as fake,
            running_daemon(tmp_path, fake.url, base_env=agent_env, backends=found, **CONTROL),
        ):
            agent = {"model": model.id, "thinking_level": "high", "service_tier": "priority"}
            task_id = fake.queue_issue(provider="codex", agent=agent)
            assert (await fake.finished(task_id, within=120)).status == "completed"
    (request,) = api.main_requests()
    assert request.body.get("service_tier") == "priority"
    assert request.body.get("reasoning", {}).get("effort") == "high"
