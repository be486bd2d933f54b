"""The reference server's bearer token, kept in a file of the state directory.

Apart from the server's other modules: `submit` and a daemon talking to a remote server read
or make the token without importing the server (uvicorn, starlette, SQLite).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

from daemon.errors import ConfigError
from daemon.files.private import ensure_dir

TOKEN_FILE = "server.token"
"""The generated token's file name in the state directory (mode 0600)."""


def read_token(path: Path) -> str:
    """The token kept in `path`, or "" when there is none yet."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the server token {path}: {exc}") from exc
    if not token or any(c.isspace() for c in token):
        raise ConfigError(f"the server token file {path} is malformed; delete it to make a new one")
    return token


def ensure_token(path: Path) -> str:
    """The token in `path`, generated there (mode 0600) on first use.

    The file is written under a temporary name opened 0600 from its creation, then linked into
    place, so no other user can read it at any moment and a reader never sees half a token; two
    servers starting at once agree on whichever link landed first.
    """
    existing = read_token(path)
    if existing:
        return existing
    try:
        ensure_dir(path.parent)
        temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(secrets.token_urlsafe(32) + "\n")
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(temp, path)
        finally:
            temp.unlink(missing_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the server token {path}: {exc}") from exc
    return read_token(path)
