"""What the `multica` CLI and its daemon keep in `~/.multica`: the daemon id, the login config,
and the paths custom runtime profiles run on this machine.

Reusing these files is what lets this daemon take over from Multica's own: the server binds
agents to runtimes registered under the machine's daemon id, so a daemon that made up a new
id would register runtimes no agent is assigned to. Every function takes the home directory
(and profile) as an argument; only `daemon.config` reads the environment.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from daemon.boundary.untrusted import read_regular
from daemon.errors import ConfigError
from daemon.protocol import jsonin

log = logging.getLogger(__name__)

DAEMON_ID_FILE = "daemon.id"
CONFIG_FILE = "config.json"
ID_LIMIT = 4096
"""Bytes of `daemon.id` read: a UUID and a newline."""
CONFIG_LIMIT = 1024 * 1024
"""Bytes of `config.json` read: the CLI writes a few hundred."""


def profile_dir(home: Path, profile: str = "") -> Path:
    """`~/.multica`, or `~/.multica/profiles/<profile>` for a named profile."""
    root = home / ".multica"
    if not profile:
        return root
    # A name is one directory: no path characters, and no control characters (a newline in a
    # name would forge lines wherever it is logged or written).
    unsafe = any(c in "/\\" or not c.isprintable() for c in profile)
    if profile in (".", "..") or unsafe:
        raise ConfigError(f"invalid Multica profile name {profile!r} (MULTICA_PROFILE)")
    return root / "profiles" / profile


def daemon_id(home: Path, pinned: str = "", profile: str = "", legacy: Path | None = None) -> str:
    """The machine's daemon id: `pinned` (MULTICA_DAEMON_ID), else `~/.multica/daemon.id`.

    The file is machine-wide even under a profile, as in Multica. When it is missing or does
    not hold a UUID, a named profile's own `daemon.id` is promoted to it (an older CLI kept one
    per profile), else the `legacy` file's (an earlier agent-daemon kept its id in its state
    directory: its runtimes stay its own), else a new UUID is written, owner-only.
    """
    if pinned.strip():
        return pinned.strip()
    path = profile_dir(home) / DAEMON_ID_FILE
    found = _read_uuid(path)
    if found:
        return found
    promoted = _read_uuid(profile_dir(home, profile) / DAEMON_ID_FILE) if profile else ""
    promoted = promoted or (_read_uuid(legacy) if legacy is not None else "")
    chosen = promoted or str(uuid.uuid4())
    _write_private(path, chosen + "\n")
    return chosen


def legacy_daemon_ids(
    home: Path, hostname: str, profile: str, current: str, earlier: Path | None = None
) -> list[str]:
    """The ids this machine may have registered runtimes under before `current`, as Multica's
    daemon reports them at register (`legacy_daemon_ids`), so the server folds those runtimes,
    with the agents bound to them, into this daemon's: the host name with and without
    `.local` (and each with `-<profile>`; ids from before the daemon id was a UUID), each
    profile's own `daemon.id` (an older CLI kept one per profile), and the `earlier` file's
    (an earlier agent-daemon's id in its state directory). A file that cannot be read is
    skipped: a stale id must never stop a start.
    """
    host = hostname.strip()
    candidates: list[str] = []
    if host:
        forms = [host.removesuffix(".local"), host.removesuffix(".local") + ".local"]
        candidates += forms + ([f"{form}-{profile}" for form in forms] if profile else [])
    files = sorted((profile_dir(home) / "profiles").glob(f"*/{DAEMON_ID_FILE}"))
    for path in [*files, *([earlier] if earlier is not None else [])]:
        try:
            candidates.append(_read_uuid(path))
        except ConfigError:
            continue
    found = dict.fromkeys(c for c in candidates if c and c != current)
    return list(found)


def _read_uuid(path: Path) -> str:
    try:
        data = read_regular(path, ID_LIMIT)
        _check_owned(path)
        text = data.decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise ConfigError(f"cannot read the daemon id file {path}: {exc}") from exc
    try:
        return str(uuid.UUID(text))
    except ValueError:
        return ""


def _write_private(path: Path, text: str) -> None:
    # Written beside the target and renamed over it, so a crash never leaves a half-written
    # id that the next start would replace with a different one.
    path.parent.parent.mkdir(parents=True, exist_ok=True)
    # Owner-only from its creation, as the CLI makes it: it holds the login token.
    path.parent.mkdir(mode=0o700, exist_ok=True)
    _check_owned(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=".daemon-", suffix=".id.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True, slots=True)
class MulticaConfig:
    """The fields of the CLI's `config.json` this daemon uses; empty when not set."""

    server_url: str = ""
    # The login token (a `mul_` personal token); never logged.
    token: str = ""
    workspace_id: str = ""
    device_name: str = ""
    workspaces_root: str = ""
    path: Path | None = None


def _config_json(home: Path, profile: str) -> tuple[Path, Any]:
    """The CLI's `config.json` for `profile` and what it holds parsed (None: no such file);
    `ConfigError` when it cannot be read, is not the user's own or is not JSON."""
    path = profile_dir(home, profile) / CONFIG_FILE
    try:
        data = read_regular(path, CONFIG_LIMIT)
        _check_owned(path)
        return path, jsonin.loads(data, limit=CONFIG_LIMIT, what="the file")
    except FileNotFoundError:
        return path, None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the Multica config {path}: {exc}") from exc


def read_config(home: Path, profile: str = "") -> MulticaConfig:
    """The CLI's `config.json` for `profile` (default profile when empty); empty if absent."""
    path, raw = _config_json(home, profile)
    if raw is None:
        return MulticaConfig()
    if not isinstance(raw, dict):
        raise ConfigError(f"the Multica config {path} is not a JSON object")
    fields = ("server_url", "token", "workspace_id", "device_name", "workspaces_root")
    values: dict[str, str] = {}
    for name in fields:
        value = raw.get(name) or ""
        if not isinstance(value, str):
            raise ConfigError(f"the Multica config {path}: {name} must be a string")
        values[name] = value.strip()
    return MulticaConfig(**values, path=path)


def profile_command_overrides(home: Path, profile: str = "") -> dict[str, str]:
    """The executable each custom runtime profile runs on this machine, by profile id, as
    `multica runtime profile set-path` writes them (`profile_command_overrides` in the CLI's
    `config.json`). Read at start, as Multica's daemon reads them (the CLI says to restart);
    a config that cannot be read, or entries that are not paths, give none: the profiles'
    commands are looked up on PATH instead."""
    try:
        _, raw = _config_json(home, profile)
    except ConfigError as exc:
        log.warning("custom runtime paths not read: %s", exc)
        return {}
    found = raw.get("profile_command_overrides") if isinstance(raw, dict) else None
    if not isinstance(found, dict):
        return {}
    return {
        key: value.strip()
        for key, value in found.items()
        if isinstance(key, str) and key and isinstance(value, str) and value.strip()
    }


def _check_owned(path: Path) -> None:
    """Refuse `path`, and each directory above it up to `.multica`, when another user owns it
    or can write it: such a file could name any server and token. FileNotFoundError when
    `path` is missing."""
    chain = [path]
    for parent in path.parents:
        if ".multica" not in parent.parts:
            break
        chain.append(parent)
    me = os.geteuid()
    for part in chain:
        info = part.stat()
        if info.st_uid not in (me, 0):
            raise ConfigError(f"{part} belongs to another user (uid {info.st_uid}): not used")
        if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            mode = stat.S_IMODE(info.st_mode)
            raise ConfigError(f"{part} is writable by others (mode {mode:o}): not used")


def default_workspaces_root(home: Path, profile: str = "") -> Path:
    """Multica's default work tree: `~/multica_workspaces`, or `~/multica_workspaces_<profile>`."""
    return home / (f"multica_workspaces_{profile}" if profile else "multica_workspaces")


def fill_from_config(values: dict[str, Any], home: Path, url: Callable[[str], str]) -> None:
    """Fill the settings `values` the environment left unset from the CLI's `config.json`.

    An unset server URL takes the file's `server_url` (converted by `url`); one set empty keeps
    the embedded server. The token, device name and workspaces root are taken when unset too,
    and `token_source` says where the token came from. The file's `workspace_id` (the CLI's
    default workspace) is not used: the daemon serves every workspace its token has, as
    Multica's daemon does. With both the URL and the token set the file is not read at all.
    """
    if "token" in values:
        values["token_source"] = "MULTICA_DAEMON_TOKEN"
        if "server_url" in values:
            return
    login = read_config(home, values.get("profile", ""))
    where = str(login.path)
    if "server_url" not in values and login.server_url:
        try:
            values["server_url"] = url(login.server_url)
        except ValueError:
            raise ConfigError(f"{where}: server_url {login.server_url!r} is not a URL") from None
    if "token" not in values and login.token:
        values["token"], values["token_source"] = login.token, where
    if "device_name" not in values and login.device_name:
        values["device_name"] = login.device_name
    if "workspaces_root" not in values and login.workspaces_root:
        values["workspaces_root"] = Path(login.workspaces_root).expanduser()
