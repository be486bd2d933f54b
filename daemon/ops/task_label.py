"""The one label a task goes by where its id may not be shown: the status page and its JSON.

A task's id is what the server's API takes: shown to anyone who can reach the health port, it
would let a page or a neighbour on the network name the task elsewhere. The label is a keyed
hash of the id under a key drawn once per process, cut to 10 hex characters: stable while the
daemon runs (a row keeps its label from one refresh to the next), meaningless outside it, and
new after a restart. The daemon's own log names tasks by `short_id`, for the operator who
holds both.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

LABEL_LENGTH = 10
_KEY = secrets.token_bytes(32)


def task_label(task_id: str) -> str:
    """The task's label for this process: 10 hex characters that reveal nothing of its id."""
    digest = hmac.new(_KEY, task_id.encode(), hashlib.sha256).hexdigest()
    return digest[:LABEL_LENGTH]
