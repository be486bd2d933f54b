"""Model catalogs: what fits a model (thinking levels, service tiers), the wire body, and the
catalogs read from each CLI's output as Multica's daemon reads it (recorded output where the
real CLI needs an account, the real CLIs in tests/e2e/test_multica_models.py)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from backends.acp.discovery import parse_models
from backends.acp.effort import effort_option
from backends.agent_cli import AgentCli
from backends.claude import ClaudeBackend
from backends.claude.models import help_efforts
from backends.codex.models import known_models, parse_catalog
from backends.copilot.models import vendor
from backends.models import Catalog, Model, Thinking, levels, qualified, valid_thinking
from backends.models import valid_service_tier as valid_tier
from backends.opencode.models import parse_models as opencode_models
from backends.pi import PiBackend
from backends.pi.models import rpc_models, table_models
from backends.probe import ask
from backends.process.identity import AgentUser
from tests.fakes.chat_api import pi_env
from tests.fakes.real_cli import require_cli
from tests.fakes.system_user import agent_python, passable_dir

pytestmark = pytest.mark.anyio

EFFORTS = levels(("low", "high"))
EVERY_EFFORT = ("low", "medium", "high", "xhigh", "max")
HOME_ONLY = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent"}
CATALOG = Catalog.of(
    [
        Model("a/one", provider="a", default=True, thinking=Thinking(EFFORTS, "low")),
        Model("b/two", provider="b"),
        Model("c/two", provider="c"),
    ]
)


def test_a_level_fits_the_named_or_the_default_model_that_offers_it() -> None:
    """The named model's levels decide; no model means the catalog's default one; a model
    without levels, or one not listed, takes none; an empty level always fits."""
    assert valid_thinking(CATALOG, "pi", "a/one", "high")
    assert valid_thinking(CATALOG, "pi", "", "low")
    assert not valid_thinking(CATALOG, "pi", "b/two", "low")
    assert not valid_thinking(CATALOG, "pi", "z/unknown", "low")
    assert valid_thinking(CATALOG, "pi", "b/two", "")


def test_codex_gets_no_level_and_no_tier_without_a_model() -> None:
    """Codex's default model is its configuration's (any model): nothing is given for it."""
    tiers = Catalog.of([Model("m", default=True, thinking=Thinking(EFFORTS))])
    assert not valid_thinking(tiers, "codex", "", "low")
    assert not valid_tier(tiers, "codex", "", "priority")
    assert not valid_tier(tiers, "claude", "m", "priority")


def test_claude_context_window_suffix_is_its_base_model() -> None:
    """`claude-opus-4-7[1m]` takes what `claude-opus-4-7` takes."""
    catalog = Catalog.of([Model("claude-opus-4-7", thinking=Thinking(EFFORTS))])
    assert valid_thinking(catalog, "claude", "claude-opus-4-7[1m]", "high")


def test_opencode_without_a_default_takes_a_level_any_model_offers() -> None:
    """OpenCode marks no default: a level any of its models offers is passed on."""
    catalog = Catalog.of([Model("x/y", thinking=Thinking(EFFORTS))])
    assert valid_thinking(catalog, "opencode", "", "high")
    assert not valid_thinking(catalog, "opencode", "", "max")


def test_a_bare_id_is_completed_only_when_one_provider_claims_it() -> None:
    """`one` is `a/one`; `two` is claimed by two providers and stays; a stand-in list
    completes nothing."""
    assert qualified(CATALOG, "one") == "a/one"
    assert qualified(CATALOG, "two") == "two"
    assert qualified(Catalog(CATALOG.models, fallback=True), "one") == "one"


def test_the_result_body_is_multicas_model_entry() -> None:
    """`{status, models, supported, fallback}`, each model with only the fields it has."""
    assert CATALOG.result()["models"][:2] == [
        {
            "id": "a/one",
            "label": "a/one",
            "provider": "a",
            "default": True,
            "thinking": {
                "supported_levels": [
                    {"value": "low", "label": "Low"},
                    {"value": "high", "label": "High"},
                ],
                "default_level": "low",
            },
        },
        {"id": "b/two", "label": "b/two", "provider": "b"},
    ]
    assert Catalog(supported=False).result() == {
        "status": "completed",
        "models": [],
        "supported": False,
        "fallback": False,
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "  --effort <level>                      Effort level for the current session\n"
            "                                        (low, medium, high, xhigh, max)\n",
            ("low", "medium", "high", "xhigh", "max"),
        ),
        ("  --effort <level>  Effort level (lowest, ultra)", ("lowest", "ultra")),
        ("  --effort <level>  how hard to think", ("low", "medium", "high", "xhigh", "max")),
        ("  --model <model>  Model for the session", ()),
    ],
    ids=["2.1.332", "new-words", "unreadable-list", "no-flag"],
)
def test_claude_help_names_the_efforts(text: str, expected: tuple[str, ...]) -> None:
    """The levels `claude --help` lists; its last known list when the line changed; none
    from a CLI older than the flag (it would refuse it)."""
    assert help_efforts(text) == expected


def test_codex_catalog_keeps_visible_models_with_their_efforts_and_tiers() -> None:
    """Hidden models left out, the first the default, labels as Codex's picker shows them."""
    raw = {
        "models": [
            {"slug": "gpt-5.6-sol", "display_name": "gpt-5.6-sol", "visibility": "list",
             "default_reasoning_level": "low",
             "supported_reasoning_levels": [{"effort": "low", "description": "Fast"},
                                            {"effort": "ultra"}],
             "service_tiers": [{"id": "priority", "name": "Fast", "description": "2x"}]},
            {"slug": "hidden", "visibility": "hide"},
            {"slug": "gpt-x", "visibility": "list"},
        ]
    }  # fmt: skip
    sol, other = parse_catalog(json.dumps(raw))
    assert (sol.label, sol.default, other.default, other.thinking) == (
        "GPT-5.6 Sol",
        True,
        False,
        None,
    )
    assert sol.thinking is not None
    assert [(lvl.value, lvl.label) for lvl in sol.thinking.levels] == [
        ("low", "Low"), ("ultra", "Ultra")
    ]  # fmt: skip
    assert [t.id for t in sol.service_tiers] == ["priority"]
    assert parse_catalog("WARNING: not json") == []
    assert known_models()[0].id == "gpt-5.6-sol"


def test_opencode_models_read_variants_as_levels() -> None:
    """Verbose output: each model's variants (reasoning ones) in OpenCode's order, a
    disabled one left out; a model without any has no levels; header rows skipped."""
    out = [
        "PROVIDER/MODEL",
        "fake/chat",
        "{",
        '  "id": "chat",',
        '  "api": {"npm": "@ai-sdk/openai-compatible"},',
        '  "variants": {"high": {"reasoningEffort": "high"}, "low": {},',
        '               "max": {"disabled": true}, "turbo": {"reasoningEffort": "x"}}',
        "}",
        "other/plain",
        '{"variants": {}}',
        "other/bare",
    ]
    chat, plain, bare = opencode_models(out)
    assert (chat.id, chat.provider) == ("fake/chat", "fake")
    assert chat.thinking is not None
    assert [lvl.value for lvl in chat.thinking.levels] == ["low", "high", "turbo"]
    assert plain.thinking is None and bare.id == "other/bare"


def test_pi_rpc_models_follow_its_thinking_rules() -> None:
    """A reasoning model has `off` … `high` (a level mapped to null left out), `xhigh` and
    `max` only when mapped; the state's model is the default, with its level."""
    listed = [
        {"provider": "p", "id": "plain"},
        {"provider": "p", "id": "think", "reasoning": True, "thinkingLevelMap": {"minimal": None}},
        {"provider": "p", "id": "deep", "reasoning": True, "thinkingLevelMap": {"max": "max"}},
    ]
    state = {"model": {"provider": "p", "id": "think"}, "thinkingLevel": "high"}
    plain, think, deep = rpc_models(listed, state)
    assert plain.thinking is None and not plain.default
    assert think.default and think.thinking is not None and think.thinking.default == "high"
    assert [lvl.value for lvl in think.thinking.levels] == ["off", "low", "medium", "high"]
    assert deep.thinking is not None and deep.thinking.levels[-1].value == "max"


def test_pi_table_skips_what_is_not_a_row() -> None:
    """Rows and `provider:model` lines are models; warnings, usage text and 0.73.1's "No
    models available" line are not."""
    out = [
        "provider  model  context",
        "fake      chat   128k",
        "old:style",
        'Warning: No models match pattern "x/y"',
        "No models available. Use /login to log into a provider via OAuth or API key. See:",
        "  /opt/pi/docs/providers.md",
        "Run `omp --help` for available flags.",
    ]
    assert [m.id for m in table_models(out)] == ["fake/chat", "old/style"]


def test_acp_models_from_either_block() -> None:
    """`models.availableModels` (the current one the default), else the `model` option;
    an answer with neither has no catalog."""
    block = {
        "models": {
            "availableModels": [{"modelId": "x:m1", "name": "One"}, {"modelId": "m2"}],
            "currentModelId": "m2",
        }
    }
    one, two = parse_models(block) or []
    assert (one.id, one.label, one.provider, one.default) == ("x:m1", "One", "x", False)
    assert (two.label, two.default) == ("m2", True)
    option = {"configOptions": [{"id": "model", "currentValue": "a", "options": [
        {"value": "a", "name": "A"}, {"value": "b", "name": "unknown"}]}]}  # fmt: skip
    assert [(m.id, m.label, m.default) for m in parse_models(option) or []] == [
        ("a", "A", True), ("b", "b", False)
    ]  # fmt: skip
    assert parse_models({"sessionId": "s"}) is None


def test_the_effort_option_is_found_by_id_or_category() -> None:
    """OpenCode's `effort`, jcode's `reasoning_effort` of category `thought_level`; a current
    value the option does not offer is no default."""
    found = effort_option(
        {"configOptions": [{"id": "reasoning_effort", "category": "thought_level",
                            "currentValue": "enabled",
                            "options": [{"value": "low"}, {"value": "high", "name": "Hi"}]}]}
    )  # fmt: skip
    assert found is not None
    assert (found.config_id, found.current) == ("reasoning_effort", "")
    assert [(lvl.value, lvl.label) for lvl in found.levels] == [("low", "Low"), ("high", "Hi")]
    assert effort_option({"configOptions": [{"id": "mode", "options": []}]}) is None


def test_copilot_vendors_from_ids() -> None:
    """The picker's groups: OpenAI's `gpt-` and `o3` series, Anthropic, Google, xAI."""
    found = [vendor(i) for i in ("gpt-5", "o3-mini", "opus-x", "claude-x", "gemini-3", "grok")]
    assert found == ["openai", "openai", "", "anthropic", "google", ""]


@pytest.mark.root
async def test_a_probe_runs_as_the_agent_user_in_a_directory_of_its_own(
    agent_user: AgentUser,
) -> None:
    """Asked something, the CLI runs as the agent user, in a fresh directory that user owns,
    with the launch prefix first; the directory is gone after."""
    with passable_dir("probe-") as folder:
        cli = Path(folder) / "cli"
        cli.write_text(
            f"#!{agent_python()}\nimport os, sys\n"
            "print(os.getuid(), os.getcwd(), os.stat('.').st_uid, *sys.argv[1:])\n"
        )
        cli.chmod(0o755)
        backend = AgentCli(str(cli), detect_as=agent_user).for_profile(str(cli), ["start"])
        said = await ask(backend, ["--help"])
    uid, cwd, owner, *args = said.text.split()
    assert (int(uid), int(owner), args, said.ok) == (
        agent_user.uid,
        agent_user.uid,
        ["start", "--help"],
        True,
    )
    assert not await anyio.Path(cwd).exists()


@pytest.mark.real_cli
async def test_the_real_claude_code_names_its_efforts(tmp_path: Path) -> None:
    """Claude Code's own `--help` gives every level, and the catalog narrows them per model."""
    cli = ClaudeBackend(require_cli("claude", "MULTICA_TEST_CLAUDE_PATH"), detect_env=HOME_ONLY)
    catalog = {m.id: m for m in (await cli.models()).models}
    opus, haiku = catalog["claude-opus-4-7"].thinking, catalog["claude-haiku-4-5-20251001"].thinking
    assert opus is not None and [lvl.value for lvl in opus.levels] == list(EVERY_EFFORT)
    assert haiku is not None and [lvl.value for lvl in haiku.levels] == ["low", "medium", "high"]


@pytest.mark.real_cli
async def test_the_real_pi_lists_its_models_over_rpc(tmp_path: Path) -> None:
    """Pi's RPC catalog: each configured model as `provider/id`, a reasoning one with its
    levels (`xhigh` where mapped), the default one (settings) marked with its level."""
    env = pi_env(tmp_path, "http://127.0.0.1:9")
    agent_dir = Path(env["HOME"]) / ".pi" / "agent"
    models = {"providers": {"p": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions",
              "apiKey": "k", "models": [{"id": "plain"}, {"id": "deep", "reasoning": True,
                                          "thinkingLevelMap": {"xhigh": "xhigh"}}]}}}  # fmt: skip
    (agent_dir / "models.json").write_text(json.dumps(models))
    settings = {"defaultProvider": "p", "defaultModel": "deep", "defaultThinkingLevel": "high"}
    (agent_dir / "settings.json").write_text(json.dumps(settings))
    pi = PiBackend(require_cli("pi", "MULTICA_TEST_PI_PATH"), detect_env=env)
    plain, deep = (await pi.models()).models
    assert (plain.id, plain.thinking, deep.default) == ("p/plain", None, True)
    assert deep.thinking is not None and deep.thinking.default == "high"
    assert [lvl.value for lvl in deep.thinking.levels][-2:] == ["high", "xhigh"]
