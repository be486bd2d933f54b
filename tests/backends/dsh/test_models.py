"""DeepSeek Harness's catalog from a stand-in `dsh` printing `--list-models` frames of the
documented protocol: its models with their thinking levels; a failed read fails the model
list and leaves a task's level to dsh; a level that fits goes in the execute frame."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest

from backends.dsh import DshBackend
from backends.models import DiscoveryFailed
from daemon.catalogs import ModelCatalogs
from daemon.protocol.models import Task
from daemon.task.setup.model_choice import choose
from daemon.testing.factories import task
from tests.backends.dsh.test_backend import dsh_at
from tests.backends.support import drain, stdin_spec

pytestmark = pytest.mark.anyio

FLASH = {
    "id": "deepseek-official/deepseek-v4-flash",
    "label": "DeepSeek V4 Flash",
    "provider": "deepseek-official",
    "default": True,
    "thinking": {
        "supported_levels": [
            {"value": "low", "label": "Low"},
            {"value": "high", "label": "High", "description": "Deeper reasoning"},
        ],
        "default_level": "low",
    },
}
PRO = {"id": "deepseek-official/deepseek-v4-pro", "label": "DeepSeek V4 Pro"}
LISTING = [
    {"v": 1, "type": "probe", "runtime": "dsh", "protocol_version": 1},
    {"v": 2, "type": "models", "models": [{"id": "future/model", "label": "From v2"}]},
    {"v": 1, "type": "models", "models": [{"id": 7, "label": "Not a string id"}]},
    {"v": 1, "type": "models", "models": [FLASH, PRO]},
]


def dsh_listing(tmp_path: Path, lines: list[str], exit_code: int = 0) -> DshBackend:
    """The backend on the stand-in, `--list-models` printing `lines` and exiting so."""
    listing = tmp_path / "models.jsonl"
    listing.write_text("".join(line + "\n" for line in lines))
    env = {"PATH": "/usr/bin", "MODELS": str(listing), "LIST_EXIT": str(exit_code)}
    return DshBackend(str(dsh_at(tmp_path)), detect_env=env)


async def test_the_catalog_is_dshs_models_frames_with_their_levels(tmp_path: Path) -> None:
    """Version 1 `models` frames only (a frame of another version, one of the wrong shape,
    a line that is no JSON passed over): ids, labels, providers, the default, the levels."""
    lines = ["dsh: loading profile multica", *map(json.dumps, LISTING)]
    catalog = await dsh_listing(tmp_path, lines).models()
    # The two v1 models as dsh printed them, nothing added or dropped.
    assert catalog.result()["models"] == [FLASH, PRO]
    assert not catalog.fallback


@pytest.mark.parametrize(
    ("lines", "exit_code", "why"),
    [
        ([json.dumps(LISTING[-1])], 2, "exited 2"),
        ([json.dumps(LISTING[0])], 0, "empty model catalog"),
    ],
    ids=["exit", "empty"],
)
async def test_a_failed_read_fails_the_model_list(
    tmp_path: Path, lines: list[str], exit_code: int, why: str
) -> None:
    """A dsh that exits non-zero (models printed or not) or lists none gives no catalog: the
    model-list answer is `failed`, naming why."""
    backend = dsh_listing(tmp_path, lines, exit_code)
    with pytest.raises(DiscoveryFailed, match=why):
        await backend.models()
    answer = await ModelCatalogs().result(backend)
    assert answer["status"] == "failed" and why in str(answer["error"])


async def test_a_level_is_checked_against_dshs_catalog_or_passed_on_without_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`high` fits the default model, not Pro (dropped with a warning); with no catalog read
    (dsh failed), the level goes to dsh unchecked."""
    (tmp_path / "ok").mkdir()
    listed = dsh_listing(tmp_path / "ok", [json.dumps(LISTING[-1])])
    failing = dsh_listing(tmp_path, [], 1)
    catalogs = ModelCatalogs()
    caplog.set_level(logging.WARNING, "daemon.task.setup.model_choice")

    def asked(model: str) -> Task:
        return task(agent={"model": model, "thinking_level": "high"})

    default = await choose(asked(""), listed, catalogs)
    pro = await choose(asked(PRO["id"]), listed, catalogs)
    unread = await choose(asked(PRO["id"]), failing, catalogs)
    assert (default.thinking_level, pro.thinking_level, unread.thinking_level) == (
        "high",
        "",
        "high",
    )
    assert "thinking level 'high' does not fit dsh model" in caplog.text


async def test_the_level_reaches_dsh_in_the_execute_frame(tmp_path: Path) -> None:
    """The run's thinking level is the execute command's `reasoning_effort`."""
    record = tmp_path / "record.jsonl"
    spec = stdin_spec({"RECORD": str(record), "PATH": "/usr/bin"}, tmp_path / "work")
    async with DshBackend(str(dsh_at(tmp_path))).start(replace(spec, thinking_level="high")) as run:
        await drain(run)
        await run.result()
    (sent,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert sent["command"]["reasoning_effort"] == "high"
