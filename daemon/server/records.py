"""How stored rows become the JSON objects the reference server answers with."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from daemon.server.bodies import AgentIn

DEFAULT_AGENT: dict[str, Any] = AgentIn().model_dump()


def agent_of(row: sqlite3.Row) -> dict[str, Any]:
    """The task's agent, always with every field of the protocol's agent object."""
    stored = json.loads(row["agent"])
    base = json.loads(json.dumps(DEFAULT_AGENT))  # a deep copy: callers may mutate the result
    return {**base, **stored} if isinstance(stored, dict) else base


def task_view(row: sqlite3.Row) -> dict[str, Any]:
    """A task as the reference-server extensions show it; the auth token is never included."""
    agent = agent_of(row)
    return {
        "id": row["id"],
        "status": row["status"],
        "workspace_id": row["workspace_id"],
        "backend": row["backend"],
        "prompt": row["prompt"],
        "agent_id": agent["id"],
        "agent": agent,
        "prior_session_id": row["prior_session_id"],
        "output": row["output"],
        "error": row["error"],
        "failure_reason": row["failure_reason"],
        "session_id": row["session_id"],
        "work_dir": row["work_dir"],
        "runtime_id": row["runtime_id"],
        "claimed_by": row["claimed_by"],
        "created_at": row["created_at"],
        "claimed_at": row["claimed_at"],
        "started_at": row["started_at"],
        "finished_at": row["finished_at"],
        "cancel_acked": row["cancel_acked_at"] is not None,
        "cancel_acked_at": row["cancel_acked_at"],
        "complete_calls": row["complete_calls"],
        "fail_calls": row["fail_calls"],
        "prior_work_dir": row["prior_work_dir"],
        "attempt": row["attempt"],
        "max_attempts": row["max_attempts"],
        "parent_task_id": row["parent_task_id"],
        "fire_at": row["fire_at"],
    }


def claimed_task(
    row: sqlite3.Row, runtime_type: str, repos: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A task as the claim endpoint hands it to a daemon.

    Strings are never null (a Multica server omits or empties them), and `backend` names the
    backend that will run it: the task's own, or the claiming runtime's type when the task
    accepted any backend. `repos` are those the task may check out.
    """
    agent = agent_of(row)
    return {
        "id": row["id"],
        "runtime_id": row["runtime_id"],
        "workspace_id": row["workspace_id"],
        "agent_id": agent["id"],
        "agent": agent,
        "auth_token": row["auth_token"],
        # No `prior_work_dir`: a daemon reuses one only for an issue or chat, which these tasks
        # are not, and drops a session named with a directory it does not reuse.
        "prior_session_id": row["prior_session_id"],
        "prompt": row["prompt"],
        "backend": row["backend"] or runtime_type,
        "issue_id": "",
        "repos": repos or [],
    }


def runtime_summary(row: sqlite3.Row) -> dict[str, Any]:
    """A runtime as the register endpoint returns it."""
    return {"id": row["id"], "name": row["name"], "provider": row["type"], "status": row["status"]}


def runtime_view(row: sqlite3.Row) -> dict[str, Any]:
    """A runtime with everything the server knows about it, for `GET /api/runtimes`."""
    return {
        **runtime_summary(row),
        "daemon_id": row["daemon_id"],
        "workspace_id": row["workspace_id"],
        "type": row["type"],
        "version": row["version"],
        "device_name": row["device_name"],
        "cli_version": row["cli_version"],
        "registered_at": row["registered_at"],
        "last_heartbeat_at": row["last_seen_at"],
    }


def message_view(row: sqlite3.Row) -> dict[str, Any]:
    """One transcript message as stored."""
    return {
        "seq": row["seq"],
        "type": row["type"],
        "tool": row["tool"],
        "content": row["content"],
        "input": None if row["input"] is None else json.loads(row["input"]),
        "output": row["output"],
        "received_at": row["received_at"],
    }


def usage_view(row: sqlite3.Row) -> dict[str, Any]:
    """One usage entry (per provider and model) as last reported."""
    return {
        "provider": row["provider"],
        "model": row["model"],
        "input_tokens": row["input_tokens"],
        "output_tokens": row["output_tokens"],
        "cache_read_tokens": row["cache_read_tokens"],
        "cache_write_tokens": row["cache_write_tokens"],
        "reported_at": row["reported_at"],
    }
