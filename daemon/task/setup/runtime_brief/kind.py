"""Which brief a task gets: issue, chat, quick-create or autopilot (Multica's four).

The brief is the first thing a resumed session reads, so it must not change between the runs
of one session: a run started by a comment and one started by the assignment get the same
issue brief, and what triggered this turn travels in the prompt instead.
"""

from __future__ import annotations

from enum import Enum

from daemon.protocol.models import Task


class BriefKind(Enum):
    """The four task surfaces Multica writes a different brief for."""

    ISSUE = "issue"
    CHAT = "chat"
    QUICK_CREATE = "quick_create"
    AUTOPILOT = "autopilot"


def brief_kind(task: Task) -> BriefKind:
    """The task's kind, in Multica's order when a claim carries more than one marker."""
    if task.chat_session_id:
        return BriefKind.CHAT
    if task.quick_create_prompt:
        return BriefKind.QUICK_CREATE
    if task.autopilot_run_id:
        return BriefKind.AUTOPILOT
    return BriefKind.ISSUE


def leads_a_squad(task: Task) -> bool:
    """Whether this run coordinates a squad: it closes its turns differently."""
    return task.is_leader_task or bool(task.squad_id)
