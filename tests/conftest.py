"""Shared pytest configuration."""

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from backends.process.identity import AgentUser
from daemon.boundary.pool import sweep
from tests.fakes.real_cli import CLAUDE_PINS, CODEX_PINS, InstalledCli, Pin, pin_id
from tests.fakes.system_user import passable_dir, system_user
from tests.ordering import interleaved


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long tests first, mixed with short ones (see tests/ordering.py); every worker collects
    the same tests, so every worker computes the same order."""
    items[:] = interleaved(items)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def agent_user() -> Iterator[AgentUser]:
    """A system user made for the test, removed after it (needs root: fails without)."""
    with system_user() as made:
        yield made


@pytest.fixture
def two_users() -> Iterator[tuple[AgentUser, AgentUser]]:
    """Two system users made for the test (a pool of agent users)."""
    with ExitStack() as stack:
        users = stack.enter_context(system_user()), stack.enter_context(system_user())
        try:
            yield users
        finally:
            for user in users:  # a failed test leaves nothing running under a reused uid
                sweep(user.uid)


@pytest.fixture
def passable_tmp() -> Iterator[Path]:
    """A fresh directory an agent user may pass through (tmp_path's parents are root's 0700)."""
    with passable_dir("agent-daemon-test-") as path:
        yield path


@pytest.fixture(params=CLAUDE_PINS[:1], ids=pin_id)
def claude_cli(request: pytest.FixtureRequest) -> InstalledCli:
    """The real Claude Code CLI at its newest pin, or at each with `ON_EVERY_CLAUDE_PIN`
    (skipped, saying how to install it, when it is not installed)."""
    pin: Pin = request.param
    return pin.require()


@pytest.fixture(params=CODEX_PINS[:1], ids=pin_id)
def codex_cli(request: pytest.FixtureRequest) -> InstalledCli:
    """The real Codex CLI at its newest pin, or at each with `ON_EVERY_CODEX_PIN`."""
    pin: Pin = request.param
    return pin.require()
