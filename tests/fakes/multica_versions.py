"""Multica's daemon-version gates (`server/pkg/agent/version.go`, `cli-version.ts`): the floors
and how a registered `cli_version` is read against them."""

from __future__ import annotations

import re

FLOORS = {
    "quick-create": "0.2.21",
    "handoff note": "0.3.28",
    "quick-create priority and due date": "0.4.3",
    "chat project context": "0.4.10",
}
"""Each feature Multica offers only to a daemon of at least this release (`MinQuickCreateCLI
Version`, `MinHandoffCLIVersion`, `MinQuickCreateFieldsCLIVersion`, the web UI's
`MIN_CHAT_PROJECT_CONTEXT_CLI_VERSION`)."""

_SEMVER = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
_DEV_DESCRIBE = re.compile(r"^v?\d+\.\d+\.\d+-\d+-g[0-9a-fA-F]+")


def release_of(cli_version: str) -> tuple[int, int, int] | None:
    """Go's `parseSemver`: the first `x.y.z` anywhere in the string, the rest ignored."""
    match = _SEMVER.search(cli_version.strip())
    return None if match is None else (int(match[1]), int(match[2]), int(match[3]))


def meets(cli_version: str, floor: str) -> bool:
    """Go's `CheckMinCLIVersionFor`: a git-describe build always passes, an unreadable or
    missing version never does."""
    if _DEV_DESCRIBE.match(cli_version.strip()):
        return True
    found, wanted = release_of(cli_version), release_of(floor)
    return found is not None and wanted is not None and found >= wanted
