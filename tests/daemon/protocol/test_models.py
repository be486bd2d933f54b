"""Tests for the wire models of the daemon ⇄ server protocol."""

from __future__ import annotations

import httpx
import pytest
from pydantic import ValidationError

from backends.base import Usage
from daemon.protocol.models import Agent, Task, TaskStatusResponse
from daemon.protocol.reports import TerminalReport, TranscriptMessage, UsageEntry
from daemon.protocol.runtime_models import (
    HeartbeatResponse,
    RecoverOrphansResponse,
    RegisterResponse,
    Workspace,
)
from daemon.protocol.wire import parse_claim

FULL_TASK = {
    "id": "task-1",
    "runtime_id": "rt-1",
    "workspace_id": "ws-1",
    "agent_id": "ag-1",
    "agent": {
        "id": "ag-1",
        "name": "Coder",
        "instructions": "Be brief.",
        "custom_env": {"FOO": "bar"},
        "custom_args": ["--verbose"],
        "model": "sonnet",
    },
    "auth_token": "task-secret-token",
    "prior_session_id": "sess-0",
    "prompt": "Fix the bug",
    "issue_id": "iss-1",
    "trigger_comment_content": "please",
    "chat_message": "hi",
    "quick_create_prompt": "qc",
    "autopilot_title": "t",
    "autopilot_description": "d",
    "backend": "claude",
}


def test_task_reads_every_protocol_field() -> None:
    """A full claimed task parses into the model with its nested agent."""
    task = Task.model_validate(FULL_TASK)
    assert task.id == "task-1"
    assert task.agent.custom_env == {"FOO": "bar"}
    assert task.agent.custom_args == ["--verbose"]
    assert task.agent.model == "sonnet"
    assert task.auth_token == "task-secret-token"
    assert task.prompt == "Fix the bug"
    assert task.backend == "claude"


def test_unknown_fields_are_ignored() -> None:
    """Fields the server adds that the protocol does not name are dropped, not errors."""
    task = Task.model_validate({**FULL_TASK, "priority": 3, "agent": {"skills": ["x"]}})
    assert task.id == "task-1"
    assert not hasattr(task, "priority")
    assert task.agent == Agent()


def test_task_needs_only_an_id() -> None:
    """Every field but `id` has an empty default."""
    task = Task.model_validate({"id": "t"})
    assert task.prompt == ""
    assert task.agent.custom_env == {}
    assert task.agent.custom_args == []


def test_task_without_id_is_a_validation_error() -> None:
    """A task missing its id does not parse."""
    with pytest.raises(ValidationError):
        Task.model_validate({"prompt": "x"})


def test_nulls_mean_empty() -> None:
    """`null` where a string, list, map or agent belongs reads as empty (Go servers send it)."""
    task = Task.model_validate(
        {
            "id": "t",
            "prompt": None,
            "auth_token": None,
            "agent": {"custom_env": None, "custom_args": None, "model": None},
        }
    )
    assert (task.prompt, task.auth_token, task.agent.model) == ("", "", "")
    assert task.agent.custom_env == {}
    assert task.agent.custom_args == []
    assert Task.model_validate({"id": "t", "agent": None}).agent == Agent()


def test_numeric_ids_become_strings() -> None:
    """A server that sends numeric ids is read with string ids."""
    assert Task.model_validate({"id": 42}).id == "42"
    assert Workspace.model_validate({"id": 7}).id == "7"


def test_auth_token_is_not_in_repr_or_str() -> None:
    """The task-scoped token never shows in a repr, a str or a log line built from them."""
    task = Task.model_validate(FULL_TASK)
    assert "task-secret-token" not in repr(task)
    assert "task-secret-token" not in str(task)
    assert "task-secret-token" not in f"{task!r} {task}"


def test_register_response_requires_runtimes() -> None:
    """A registration answer without runtimes is not a registration answer."""
    with pytest.raises(ValidationError):
        RegisterResponse.model_validate({"ok": True})
    answer = RegisterResponse.model_validate(
        {"runtimes": [{"id": "rt", "name": "claude", "provider": "claude", "status": "online"}]}
    )
    assert answer.runtimes[0].id == "rt"


def test_claim_response_requires_tasks_but_accepts_null() -> None:
    """`tasks` must be present; `null` means no tasks."""
    with pytest.raises(ValueError):
        parse_claim(httpx.Response(200, json={}))
    assert parse_claim(httpx.Response(200, json={"tasks": None})) == ([], [])


def test_status_response_requires_status() -> None:
    """A status answer without a status does not parse."""
    with pytest.raises(ValidationError):
        TaskStatusResponse.model_validate({"state": "running"})


def test_small_answers_have_defaults() -> None:
    """Heartbeat and recover-orphans answers tolerate missing or null counts."""
    assert HeartbeatResponse.model_validate({}).status == ""
    counts = RecoverOrphansResponse.model_validate({"orphaned": None, "retried": 2})
    assert (counts.orphaned, counts.retried) == (0, 2)


def test_a_heartbeat_answer_reads_go_nulls_as_no_pending_action() -> None:
    """`null` pending fields (Go's nil pointers and slices) mean nothing is pending."""
    beat = HeartbeatResponse.model_validate(
        {"status": "ok", "pending_update": None, "pending_local_skill_imports": None}
    )
    assert (beat.pending_update, beat.pending_local_skill_imports) == (None, [])
    beat = HeartbeatResponse.model_validate(
        {"pending_local_skill_imports": [{"id": "i1", "skill_key": "k", "extra": 1}]}
    )
    assert [(p.id, p.skill_key) for p in beat.pending_local_skill_imports] == [("i1", "k")]


def test_transcript_message_accepts_only_sent_types() -> None:
    """`status` and `log` messages are never sent, so the model refuses them."""
    TranscriptMessage(seq=1, type="tool_use", tool="Bash", input={"command": "ls"})
    with pytest.raises(ValidationError):
        TranscriptMessage(seq=1, type="status")  # type: ignore[arg-type]


def test_messages_body_omits_missing_input() -> None:
    """A message without input is sent without the field, with every other field present."""
    message = TranscriptMessage(seq=3, type="text", content="hi")
    assert message.model_dump(mode="json", exclude_none=True) == {
        "seq": 3,
        "type": "text",
        "tool": "",
        "content": "hi",
        "output": "",
    }


def test_usage_entry_from_backend_usage() -> None:
    """A backend's Usage converts to the wire entry field for field."""
    entry = UsageEntry.from_usage(Usage("anthropic", "sonnet", 10, 20, 30, 40))
    assert entry.model_dump() == {
        "provider": "anthropic",
        "model": "sonnet",
        "input_tokens": 10,
        "output_tokens": 20,
        "cache_read_tokens": 30,
        "cache_write_tokens": 40,
    }


def test_terminal_report_body_holds_only_its_kinds_fields() -> None:
    """`complete`, `fail` and `cancel_ack` each send exactly their endpoint's body."""
    complete = TerminalReport(kind="complete", output="o", session_id="s", work_dir="/w")
    fail = TerminalReport(kind="fail", error="e", failure_reason="timeout", work_dir="/w")
    assert complete.body() == {"output": "o", "session_id": "s", "work_dir": "/w"}
    assert fail.body() == {
        "error": "e",
        "failure_reason": "timeout",
        "session_id": "",
        "work_dir": "/w",
    }
    assert TerminalReport(kind="cancel_ack").body() == {}
    assert TerminalReport(kind="cancel_ack").endpoint == "cancel-ack"


def test_skills_and_mcp_config_are_read_leniently() -> None:
    """Skills that are not objects are skipped; an MCP config that is not an object is none."""
    agent = Agent.model_validate(
        {"skills": [{"name": "s", "files": None}, "x"], "mcp_config": "not-an-object"}
    )
    assert [s.name for s in agent.skills] == ["s"] and agent.skills[0].files == []
    assert agent.mcp_config is None
    assert Agent.model_validate({"mcp_config": {}}).mcp_config == {}


def test_a_list_field_that_is_no_list_is_read_as_empty() -> None:
    """Every list of objects in a claim is read alike: a value that is no list at all (an
    older or newer server's shape) is empty, never a failed claim."""
    task = Task.model_validate(
        {
            **FULL_TASK,
            "repos": "x",
            "issue_statuses": 5,
            "agent": {"skills": "x", "skill_refs": {}, "disabled_runtime_skills": "y"},
        }
    )
    assert task.repos == [] and task.issue_statuses == []
    assert task.agent.skills == [] and task.agent.skill_refs == []
    assert task.agent.disabled_runtime_skills == []


def test_a_reports_session_bookkeeping_is_sent_only_when_set() -> None:
    """Branch, durable work dir, withheld and retired sessions ride on `complete` and `fail`
    when set (a cancel ack carries only the branch and work dir), and survive a refusal."""
    kept = {
        "branch_name": "agent/bot/abc",
        "durable_work_dir": "/home/u/app",
        "session_rollout_missing": True,
        "retired_session_id": "old-1",
    }
    complete = TerminalReport(kind="complete", output="o", work_dir="/w", **kept)
    assert complete.body() == {"output": "o", "session_id": "", "work_dir": "/w", **kept}
    ack = TerminalReport(kind="cancel_ack", **kept)
    assert ack.body() == {"branch_name": "agent/bot/abc", "durable_work_dir": "/home/u/app"}
    refused = complete.after_refusal("too large")
    assert refused is not None and refused.kind == "fail"
    assert {k: refused.body()[k] for k in kept} == kept
    stored = TerminalReport.model_validate_json(complete.model_dump_json())
    assert stored == complete
