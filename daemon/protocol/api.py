"""The server calls the task core makes, as a protocol: the real client and test fakes fit it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from daemon.protocol.models import Skill, SkillRef

if TYPE_CHECKING:
    from daemon.protocol.client import HookAnswer
from daemon.protocol.reports import TerminalReport, UsageEntry


class TaskServer(Protocol):
    """What a task's run, its transcript and the outbox need from the server."""

    async def start_task(self, task_id: str) -> None:
        """Acknowledge that the task's agent is starting."""

    async def report_progress(self, task_id: str, summary: str, step: int, total: int) -> None:
        """Say where the task is (step of total), for the server's UI."""

    async def task_status(self, task_id: str) -> str:
        """The task's status on the server."""
        ...

    async def send_messages(
        self, task_id: str, messages: Sequence[Mapping[str, Any]], *, retry: bool = True
    ) -> str | None:
        """Append a batch of transcript messages in their wire shape; the task's status when
        the server's answer named it."""

    async def pin_session(self, task_id: str, session_id: str, work_dir: str) -> None:
        """Record the running agent's session and work directory on the task."""

    async def extend_prepare_lease(self, runtime_id: str, task_id: str) -> None:
        """Keep the claimed task this daemon's while its setup runs."""

    async def wait_local_directory(self, task_id: str, reason: str) -> None:
        """Say the task waits for its local directory, and why."""

    async def invoke_plugin_hook(
        self, token: str, task_id: str, installation_id: str, hook_key: str, arguments: Any
    ) -> HookAnswer:
        """Have the server call one plugin hook the agent called as a tool."""
        ...

    async def remote_mcp_credential(
        self, token: str, task_id: str, contribution_id: str
    ) -> dict[str, str]:
        """The credential header of one remote MCP connection of the task."""
        ...

    async def report_usage(
        self, task_id: str, usage: Sequence[UsageEntry], *, retry: bool = True
    ) -> None:
        """Report the task's token usage per model."""

    async def resolve_skill_bundle(self, runtime_id: str, task_id: str, ref: SkillRef) -> Skill:
        """One skill's bundle, by reference."""
        ...

    async def send_report(
        self, task_id: str, report: TerminalReport, *, retry: bool = True
    ) -> None:
        """Send the task's one terminal call."""
