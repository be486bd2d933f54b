"""What a task tells the server: its transcript messages, its token usage, its terminal report.

One `TerminalReport` serves from end to end: the run decides it, the outbox keeps it, the
client sends it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict

from backends.base import Usage
from daemon.protocol.limits import (
    ERROR_CAP,
    NAME_CAP,
    RESULT_CAP,
    SHORT_ERROR,
    SHORT_RESULT,
    fit,
)
from daemon.protocol.models import Count, Text, WireModel

MessageKind = Literal["text", "thinking", "tool_use", "tool_result", "error"]


class TranscriptMessage(WireModel):
    """One entry of a task's live transcript (`status` and `log` messages are never sent)."""

    seq: int
    type: MessageKind
    tool: Text = ""
    content: Text = ""
    input: dict[str, Any] | None = None
    output: Text = ""


class UsageEntry(WireModel):
    """Token usage of one model during a task."""

    provider: Text = ""
    model: Text = ""
    input_tokens: Count = 0
    output_tokens: Count = 0
    cache_read_tokens: Count = 0
    cache_write_tokens: Count = 0

    @classmethod
    def from_usage(cls, usage: Usage) -> UsageEntry:
        """The wire form of a backend's `Usage`."""
        return cls(
            provider=usage.provider,
            model=usage.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
        )


class UsageBody(WireModel):
    """Body of `POST /api/daemon/tasks/{id}/usage`."""

    usage: list[UsageEntry]


ReportKind = Literal["complete", "fail", "cancel_ack"]
# What Go's daemon sends besides each call's own fields, and only when set: where a local
# directory's worktree left the work (its branch, the directory that replaced the work dir),
# a Codex session withheld because its rollout never reached the disk, and a session this run
# was told to resume and abandoned as unresumable.
_BOOKKEEPING = {"branch_name", "durable_work_dir", "session_rollout_missing", "retired_session_id"}
_BODY_FIELDS: dict[str, set[str]] = {
    "complete": {"output", "session_id", "work_dir"},
    "fail": {"error", "failure_reason", "session_id", "work_dir"},
    "cancel_ack": set(),
}
_OPTIONAL: dict[str, set[str]] = {
    "complete": _BOOKKEEPING,
    "fail": _BOOKKEEPING,
    "cancel_ack": {"branch_name", "durable_work_dir", "failure_reason"},
}


class TerminalReport(BaseModel):
    """A task's one terminal call: decided by the run, kept by the outbox, sent by the client.

    `kind` names the endpoint; `body()` is that endpoint's request body. Stored reports are read
    back strictly (an unknown field is damage), and a field added later needs only a default.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ReportKind
    output: Annotated[str, AfterValidator(lambda text: fit(text, RESULT_CAP))] = ""
    error: Annotated[str, AfterValidator(lambda text: fit(text, ERROR_CAP))] = ""
    failure_reason: str = ""
    session_id: Annotated[str, AfterValidator(lambda text: fit(text, NAME_CAP))] = ""
    work_dir: str = ""
    branch_name: str = ""
    durable_work_dir: str = ""
    session_rollout_missing: bool = False
    """The run's Codex session was withheld (`session_id` empty): the server clears the task's
    session and tells the next run on the issue that its context could not be carried over."""
    retired_session_id: str = ""
    """A session the run was told to resume and the agent could not: never offered again."""

    @property
    def endpoint(self) -> str:
        """The last path segment of this call (`complete`, `fail`, `cancel-ack`)."""
        return self.kind.replace("_", "-")

    def body(self) -> dict[str, Any]:
        """The request body of this kind's endpoint (its optional fields only when set)."""
        body = self.model_dump(include=_BODY_FIELDS[self.kind])
        optional = self.model_dump(include=_OPTIONAL[self.kind])
        if self.kind == "cancel_ack" and self.error:
            # Go's name: a cancelled run whose worktree kept the agent's work says where.
            optional["error_message"] = self.error
        return body | {k: v for k, v in optional.items() if v}

    def after_refusal(self, why: str) -> TerminalReport | None:
        """What to send once the server refused this report for `why` (not a gone task): a
        result cut to `SHORT_RESULT`, then a `fail` saying why; an error cut to `SHORT_ERROR`;
        None when nothing shorter is left to try."""
        if self.kind == "complete":
            shorter = fit(self.output, SHORT_RESULT)
            if shorter != self.output:
                return self.model_copy(update={"output": shorter})
            # The agent's work is real: where it went and what its session was stay on it.
            kept = self.model_dump(include={"session_id", "work_dir", *_BOOKKEEPING})
            error = f"the server refused the task's result: {why}"
            return TerminalReport(kind="fail", error=error, **kept)
        shorter = fit(self.error, SHORT_ERROR)
        return self.model_copy(update={"error": shorter}) if shorter != self.error else None
