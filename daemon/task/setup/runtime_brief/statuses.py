"""The issue statuses the brief names: Multica's seven, or the workspace's own catalog by
category (a custom status behaves as its category does, and the workflow's rules are
category rules)."""

from __future__ import annotations

from daemon.protocol.models import IssueStatus, Task
from daemon.task.setup.runtime_brief.markdown import code_token, inline

CATEGORIES = ("backlog", "todo", "in_progress", "in_review", "done", "blocked", "cancelled")
"""The built-in statuses, which are also the categories, in the board's order."""

CATEGORY_RULE = (
    "- These are category rules: every status of this workspace's catalog (under"
    ' "Commands") follows the rules of its category. When a category holds several'
    " statuses, pick one by its name and description, or as your instructions say.\n"
)


def status_command(task: Task) -> str:
    """The `multica issue status` line, with the catalog when the workspace has one."""
    command = "- `multica issue status <id> <status> [--no-start]`: set the status"
    if not task.issue_statuses:
        return command + ", one of " + " / ".join(CATEGORIES) + ".\n"
    grouped: dict[str, list[IssueStatus]] = {}
    for status in task.issue_statuses:
        if code_token(status.key):
            grouped.setdefault(status.category, []).append(status)
    text = command + (
        ". This workspace's statuses by category; a custom status behaves exactly as its"
        " category does:\n"
    )
    plain = [f"`{c}`" for c in CATEGORIES if c not in grouped]
    for category in CATEGORIES:
        if category in grouped:
            entries = [f"`{category}` (built-in)", *map(_entry, grouped[category])]
            text += f"  - `{category}`: " + ", ".join(entries) + "\n"
    if plain:
        text += "  - Built-in only: " + ", ".join(plain) + ".\n"
    if task.issue_statuses_omitted > 0:
        text += (
            f"  - And {task.issue_statuses_omitted} more custom statuses not listed; a status"
            " that does not exist fails with the full list.\n"
        )
    return text


def _entry(status: IssueStatus) -> str:
    name, about = inline(status.name), inline(status.description)
    shown = f"`{code_token(status.key)}`"
    if name and about:
        return f"{shown} ({name} — {about})"
    return f"{shown} ({name})" if name else shown
