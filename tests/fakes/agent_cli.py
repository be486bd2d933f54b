"""A stand-in agent CLI written by a test: an executable answering `--version` with a version
of the test's choosing (and noting each time it is asked), `--help` with a help text, and
otherwise printing lines, each run's arguments noted (`runs_of`); or one an agent user
planted, noting the uid of each run."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from backends.process.identity import AgentUser

_SCRIPT = """#!{python}
import json, sys, time
open({runs!r}, "a").write(json.dumps(sys.argv[1:]) + "\\n")
if "--version" in sys.argv:
    open({asked!r}, "a").write("asked\\n")
    print({version!r}, flush=True)
    sys.exit(0 if {version!r} else 1)
if "--help" in sys.argv:
    print({help!r}, flush=True)
    sys.exit(0)
for line in {lines!r}:
    print(line, flush=True)
time.sleep({linger!r})
"""


def write_cli(
    path: Path,
    version: str,
    lines: Sequence[str] = (),
    *,
    linger: float = 0.0,
    help_text: str = "",
) -> Path:
    """Install (or replace, as an upgrade does: a new file renamed over the old one) a CLI at
    `path` that answers `--version` with `version` ("" = fails) and, run otherwise, prints
    `lines` and stays `linger` seconds; `asked_of(path)` counts its `--version` runs."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(
        _SCRIPT.format(
            python=sys.executable,
            asked=str(asked_file(path)),
            runs=str(path.with_name(path.name + ".runs")),
            help=help_text,
            version=version,
            lines=list(lines),
            linger=linger,
        )
    )
    staged.chmod(0o755)
    os.replace(staged, path)
    return path


def asked_file(path: Path) -> Path:
    return path.with_name(path.name + ".asked")


def runs_of(path: Path) -> list[list[str]]:
    """The arguments of every run of the CLI at `path`, in order."""
    found = path.with_name(path.name + ".runs")
    return [json.loads(line) for line in found.read_text().splitlines()] if found.exists() else []


def asked_of(path: Path) -> int:
    """How many times the CLI at `path` was asked for its version."""
    found = asked_file(path)
    return len(found.read_text().splitlines()) if found.exists() else 0


CLAUDE_ANSWER = (
    json.dumps({"type": "system", "subtype": "init", "session_id": "s1"}),
    json.dumps(
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "result": "Done.",
            "session_id": "s1",
        }
    ),
)
"""A Claude Code run that answers `Done.` in stream-json."""

NEW_SHAPE = (
    json.dumps({"kind": "session.open", "id": "s1"}),
    json.dumps({"kind": "chunk", "text": "Hello"}),
)
"""Lines of an output format no parser here knows (a CLI upgrade that changed it)."""


_RECORDING = """#!/bin/sh
id -u >> "$(dirname "$0")/euids"
echo {version}
"""


def recording_cli(version: str) -> str:
    """A shell CLI that notes its effective uid in `euids` beside it, then answers `version`."""
    return _RECORDING.format(version=shlex.quote(version))


def plant_cli(path: Path, version: str, user: AgentUser) -> Path:
    """A shell CLI at `path` written by `user` itself, as an agent that rewrote a CLI in its
    own folder would: each run adds its effective uid to `euids` beside it, and answers
    `version` (the folder must be `user`'s)."""
    script = recording_cli(version)
    subprocess.run(
        ["sh", "-c", 'cat > "$1" && chmod 0755 "$1"', "sh", str(path)],
        input=script.encode(),
        check=True,
        **user.spawn_options(),
    )
    return path


def euids_of(folder: Path) -> list[int]:
    """The effective uids the planted CLIs in `folder` ran as, in order."""
    found = folder / "euids"
    return [int(n) for n in found.read_text().split()] if found.exists() else []
