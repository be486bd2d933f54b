"""Why an agent CLI can no longer be used here, as the offline reason its runtimes are taken
offline with (`deregister`'s `offline_reasons`: `{code, detail, repair}`).

`not_executable` is Multica's own code, and the one its server acts on: work for such a
runtime is refused with the repair shown, not queued, since no waiting fixes it. The system
refuses to start the file (ENOEXEC): most often an npm package's placeholder at its `bin/`
entry, left there because its postinstall never ran (npm 12's allowScripts, pnpm 10's
approve-builds, `--ignore-scripts`, `--omit=optional`); the repair is to run that
postinstall in the package's directory, read from the package's own manifest.

A CLI gone from its path (`not_installed`) or older than the backend needs
(`version_too_old`) carries its reason too. Multica's server stores it and treats the runtime
as offline, work queued until the machine has the CLI again — which is right: reinstalling
or upgrading it brings the runtime back by itself.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
from pathlib import Path

from daemon.protocol.runtime_models import OfflineReason

NOT_EXECUTABLE = "not_executable"
NOT_INSTALLED = "not_installed"
VERSION_TOO_OLD = "version_too_old"
_BLOCKED_BY = "npm 12 allowScripts, pnpm 10 approve-builds, --ignore-scripts, --omit=optional"
_MANIFEST_LIMIT = 1024 * 1024


def not_executable(path: str, error: OSError) -> OfflineReason:
    """The system refuses to start `path`: the reason, with the repair when it is (through
    its links: npm links `bin/claude` to the package's file) an npm package's `bin/` entry
    whose package runs a postinstall."""
    repair = npm_repair(os.path.realpath(path))
    machine = f"{platform.system().lower()}/{platform.machine()}"
    if repair is None:
        detail = (
            f"{path} is not a runnable executable on {machine} ({error.strerror}). For an "
            "agent CLI installed from npm this usually means its postinstall never ran "
            f"({_BLOCKED_BY} all block it). Reinstall the CLI with install scripts enabled."
        )
        return OfflineReason(code=NOT_EXECUTABLE, detail=detail)
    detail = (
        f"{path} is not a runnable executable on {machine} ({error.strerror}). It is the bin "
        f"entry of npm package {repair['package']}, whose postinstall never ran ({_BLOCKED_BY} "
        f"all block it). Run `{repair['command']}`, or reinstall it with install scripts enabled."
    )
    return OfflineReason(code=NOT_EXECUTABLE, detail=detail, repair=repair)


def not_installed(name: str, path: str) -> OfflineReason:
    """The CLI's command finds no executable any more."""
    return OfflineReason(code=NOT_INSTALLED, detail=f"{name}: {path} is no longer installed")


def too_old(name: str, version: str, needed: str) -> OfflineReason:
    """The CLI answers with a version older than the backend works with."""
    detail = f"{name} {version} is older than {needed}, the oldest this daemon runs"
    return OfflineReason(code=VERSION_TOO_OLD, detail=detail)


def npm_repair(path: str) -> dict[str, str] | None:
    """`{package, command, shell}` that runs the postinstall of the npm package whose `bin/`
    holds `path`; None when `path` is not such an entry (or the package runs none)."""
    entry = Path(path)
    if entry.parent.name.lower() != "bin":
        return None
    root = entry.parent.parent
    try:
        with open(root / "package.json", "rb") as f:
            manifest = json.loads(f.read(_MANIFEST_LIMIT))
    except (OSError, ValueError):
        return None
    scripts = manifest.get("scripts") if isinstance(manifest, dict) else None
    script = scripts.get("postinstall") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip():
        return None
    name = manifest.get("name")
    package = name.strip() if isinstance(name, str) and name.strip() else root.name
    command = f"cd {shlex.quote(os.fspath(root))} && {script.strip()}"
    return {"package": package, "command": command, "shell": "bash"}
