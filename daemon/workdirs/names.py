"""The names Multica's daemon gives a task's directory, a repository's cache, its checkout and
the task's branch.

Kept exactly as Go names them (`execenv.PredictRootDir`, `repocache`), so a directory, cache or
branch made by one daemon is the one the other finds: `<last 12 hex digits of the task id>`
for the task's directory under its workspace, `github.com+org+repo.git` for the cache, `repo`
for the checkout directory, `agent/<agent name, sanitised>/<the same 12 digits>` for the branch.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from daemon.files.private import path_part

TASK_KEY_LEN = 12
"""A task's directory and branch segment: the id's LAST hex digits (a UUIDv7's first ones are
a clock, shared by every task of the same minute or so; the last ones are random)."""
_NAME_MAX = 30
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_COMPONENT_MAX = 200


def _host_and_path(url: str) -> tuple[str, str]:
    """(host, path) of a URL (`https://h/p`, `ssh://u@h:22/p`), scp form (`u@h:p`) or a path."""
    try:
        parts = urlsplit(url)
        if parts.scheme and parts.netloc:
            return parts.netloc.rsplit("@", 1)[-1], parts.path.lstrip("/")
    except ValueError:
        pass
    rest = url.split("@", 1)[1] if "@" in url else url
    if ":" in rest:
        host, path = rest.split(":", 1)
        return host, path
    return "", rest


def bare_dir_name(url: str) -> str:
    """The cache directory's name: host and path segments joined by `+`, ending in `.git`.

    `+` cannot appear in a GitHub or GitLab path segment, and `:` in the host becomes `%3A`,
    so two URLs share a name only when they name the same repository. A name that would not
    be one plain path component (too long, `..`) becomes a hashed one instead.
    """
    host, path = _host_and_path(url.rstrip("/"))
    host = host.strip().lower().replace(":", "%3A")
    parts = ([host] if host else []) + [seg for seg in path.split("/") if seg]
    name = "+".join(parts)
    if not name.endswith(".git"):
        name += ".git"
    if name == ".git":
        name = "repo.git"
    if len(name) > _COMPONENT_MAX or name.startswith(".") or "\x00" in name:
        return path_part(url) + ".git"
    return name


def repo_name(url: str) -> str:
    """The checkout's directory name: the URL's last segment without `.git` (else `repo`)."""
    name = url.rstrip("/").removesuffix(".git")
    name = name.rsplit("/", 1)[-1]
    if ":" in name:
        name = name.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    name = name.strip()
    # Go would join `..` onto the work dir and climb out of it; here it is just `repo`.
    if name in ("", ".", "..") or "\x00" in name or len(name) > _COMPONENT_MAX:
        return "repo"
    return name


def sanitize_name(name: str) -> str:
    """An agent's name as one branch segment: lower case, `a-z0-9` and `-`, at most 30."""
    text = _NOT_ALNUM.sub("-", name.strip().lower()).strip("-")
    if len(text) > _NAME_MAX:
        text = text[:_NAME_MAX].rstrip("-")
    return text or "agent"


def task_key(task_id: str) -> str:
    """The task's directory and branch segment: the last 12 characters of its id without
    dashes (Go's `taskKey`)."""
    plain = task_id.replace("-", "")
    return plain[-TASK_KEY_LEN:] if len(plain) > TASK_KEY_LEN else plain


def task_dir_name(task_id: str) -> str:
    """The task's directory under its workspace: Go's task key for an id that is one plain
    path component (Multica's are UUIDs), else the whole id made one (`path_part`).

    Earlier versions named it after the whole id; such a directory is still a task directory
    (the GC goes by its `.gc_meta.json`, reuse by its markers), only no new task gets one.
    """
    plain = path_part(task_id)
    return task_key(task_id) if plain == task_id else plain


def branch_name(agent_name: str, task_id: str) -> str:
    """`agent/<sanitised agent name>/<task key>`, as Multica's daemon names a task's branch."""
    return f"agent/{sanitize_name(agent_name)}/{task_key(task_id)}"
