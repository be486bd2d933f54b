"""A task's label: stable in one process, short, and no part of its id."""

from __future__ import annotations

import subprocess
import sys

from daemon.ops.task_label import LABEL_LENGTH, task_label

TASK_ID = "6f1c2b4e-0d7a-4f8e-9a51-3c2d1e0f9b87"


def test_a_label_is_stable_short_and_says_nothing_of_the_id() -> None:
    """The same id gets the same 10 hex characters; another id another label; none of the
    id's own characters in order (not a prefix, not its short form)."""
    label = task_label(TASK_ID)
    assert label == task_label(TASK_ID)
    assert len(label) == LABEL_LENGTH and int(label, 16) >= 0
    assert label != task_label(TASK_ID.replace("6", "7"))
    assert label not in TASK_ID and TASK_ID[:8] not in label


def test_another_process_gives_another_label() -> None:
    """The key is drawn per process: a label cannot be computed from the id elsewhere."""
    code = f"from daemon.ops.task_label import task_label; print(task_label({TASK_ID!r}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() != task_label(TASK_ID)
