"""Fixtures for the reference server's tests: a store on a real SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.server.store import Store


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "server.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    opened = Store(db_path)
    yield opened
    opened.close()
