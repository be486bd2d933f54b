"""The release this daemon reports to Multica unlocks every feature Multica gates on one."""

from __future__ import annotations

import pytest

from daemon.protocol.release import MULTICA_RELEASE, cli_version
from tests.fakes.multica_versions import FLOORS, meets, release_of


@pytest.mark.parametrize(("feature", "floor"), sorted(FLOORS.items()))
def test_the_reported_version_meets_each_floor(feature: str, floor: str) -> None:
    """Multica reads `cli_version` against each feature's floor: every one is met."""
    assert meets(cli_version(), floor), f"{feature} needs {floor}, we report {cli_version()}"


def test_the_release_is_the_highest_floor_or_later() -> None:
    """The one constant is at least the newest floor (a later floor means a new release)."""
    newest = max(FLOORS.values(), key=release_of)
    assert release_of(MULTICA_RELEASE) is not None
    assert release_of(MULTICA_RELEASE) >= release_of(newest)  # type: ignore[operator]


def test_the_version_names_this_daemon_after_the_release() -> None:
    """The release comes first (what Multica parses); the daemon's own name and version follow,
    and the string is not a git-describe build (which Multica would wave through any gate)."""
    text = cli_version("1.2.3")
    assert text == f"{MULTICA_RELEASE} (agent-daemon 1.2.3)"
    assert release_of(text) == release_of(MULTICA_RELEASE)
    assert not meets(cli_version("1.2.3").replace(MULTICA_RELEASE, "0.0.1"), "0.2.21")
