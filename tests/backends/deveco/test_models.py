"""DevEco Code's catalog from a stand-in `deveco` printing `deveco models`, and its thinking
level on the command line (`--variant`, as Multica gives it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from backends.base import RunSpec
from backends.deveco import DevecoBackend
from daemon.catalogs import ModelCatalogs
from daemon.task.setup.model_choice import choose
from daemon.testing.factories import task
from tests.fakes.agent_cli import runs_of, write_cli

pytestmark = pytest.mark.anyio

LISTING = (
    "PROVIDER/MODEL            CONTEXT",
    "huawei/pangu-coder-2      128k",
    '{"id": "json/ignored"}',
    '"quoted/ignored"',
    "deepseek/deepseek-v4      64k",
    "plain-word-without-slash",
    "huawei/pangu-coder-2      again",
)


async def test_the_catalog_is_the_provider_slash_model_words(tmp_path: Path) -> None:
    """Each line's first word with a `/` (not JSON, quoted or an upper-case header), once;
    the provider what precedes the `/`, the label the id."""
    cli = write_cli(tmp_path / "deveco", "0.9.0", LISTING)
    catalog = await DevecoBackend(str(cli)).models()
    assert catalog.result()["models"] == [
        {"id": "huawei/pangu-coder-2", "label": "huawei/pangu-coder-2", "provider": "huawei"},
        {"id": "deepseek/deepseek-v4", "label": "deepseek/deepseek-v4", "provider": "deepseek"},
    ]
    assert runs_of(cli) == [["models"]]


def test_the_thinking_level_is_its_variant() -> None:
    """A level that passed the catalog's check goes to `run --variant`."""
    spec = RunSpec(prompt="p", workdir=Path("/w"), env={}, thinking_level="high")
    argv = DevecoBackend("deveco").argv(spec)
    assert argv[argv.index("--variant") + 1] == "high"
    assert "--variant" not in DevecoBackend("deveco").argv(RunSpec("p", Path("/w"), {}))


async def test_a_bare_model_is_completed_from_the_catalog(tmp_path: Path) -> None:
    """DevEco, as OpenCode, takes a model only as `provider/model`: a bare id one provider's
    entry claims is completed before the run, with no level set at all."""
    cli = write_cli(tmp_path / "deveco", "0.9.0", LISTING)
    agent = {"model": "pangu-coder-2"}
    choice = await choose(task(agent=agent), DevecoBackend(str(cli)), ModelCatalogs())
    assert choice.model == "huawei/pangu-coder-2"
