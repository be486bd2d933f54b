"""Short handles that name a task, workspace or runtime wherever the daemon's token is not shown.

Whoever reaches the health port reads `/health` and `/metrics` without a token, and every agent
on this machine reaches it. A task's id names its work dir (`<workspace id>/<last 12 hex of
the task id>`), so an agent that read another task's id could write into that task's tree.
A handle is a keyed hash of the id under a key made at each daemon start: it tells the rows of
one answer apart and stays the same while the daemon runs, but cannot be turned back into the
id. Its letters are `g`-`z` only, so no handle is ever a hex run of an id or a directory name
the daemon makes. Every part of the operations side names tasks through this one module, so
one handle means one task on every page and scrape.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets

LENGTH = 10
"""Letters in a handle: 20**10 (~43 bits) keeps a collision among running tasks unheard of."""
_ALPHABET = "ghijklmnopqrstuvwxyz"
"""No hex digit: a handle can never be read as part of an id."""
_KEY = secrets.token_bytes(32)
"""Made per daemon start: a handle from one run says nothing in the next."""


@functools.lru_cache(maxsize=4096)
def handle(kind: str, value: str) -> str:
    """The handle of `value`, an id of `kind` (`task`, `workspace`, `runtime`).

    Remembered for the ids named lately: the health port names every running task by its
    handle on each tick, and 200 keyed hashes were a third of a tick."""
    digest = hmac.new(_KEY, f"{kind}\0{value}".encode(), hashlib.sha256).digest()
    number = int.from_bytes(digest[:8], "big")
    letters = []
    for _ in range(LENGTH):
        number, index = divmod(number, len(_ALPHABET))
        letters.append(_ALPHABET[index])
    return "".join(letters)


def task_handle(task_id: str) -> str:
    """The handle a task goes by without the daemon's token."""
    return handle("task", task_id)


def workspace_handle(workspace_id: str) -> str:
    """The handle a workspace goes by without the daemon's token."""
    return handle("workspace", workspace_id)


def runtime_handle(runtime_id: str) -> str:
    """The handle a runtime goes by without the daemon's token."""
    return handle("runtime", runtime_id)
