"""Shared pytest configuration."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from backends.process.identity import AgentUser
from tests.fakes.system_user import passable_dir, system_user


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def agent_user() -> Iterator[AgentUser]:
    """A system user made for the test, removed after it (needs root: fails without)."""
    with system_user() as made:
        yield made


@pytest.fixture
def passable_tmp() -> Iterator[Path]:
    """A fresh directory an agent user may pass through (tmp_path's parents are root's 0700)."""
    with passable_dir("agent-daemon-test-") as path:
        yield path
