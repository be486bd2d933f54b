"""Bodies of the runtime-level calls: the workspaces, their repositories and custom runtime
profiles, the register and deregister, the orphans' recovery, a heartbeat and its answer with
the actions the server hands the runtime (over HTTP, or as the control WebSocket's ack), and
the token renewal's answer. Read as leniently as every body (models.py)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from daemon.protocol.models import Count, Flag, RepoList, Text, TextList, WireModel

RUNTIME_GONE = "runtime_gone"
"""The status of a heartbeat answer for a runtime the server no longer has."""


def _none_is_empty(value: Any) -> Any:
    # Go sends `null` for an empty slice.
    return [] if value is None else value


class PendingAction(WireModel):
    """A request the server queued for this runtime (model list, skills, ...), by its id."""

    id: str
    target_version: Text = ""
    skill_key: Text = ""


class HeartbeatResponse(WireModel):
    """Answer to a heartbeat, with the pending actions the server hands this runtime."""

    status: Text = ""
    runtime_gone: bool = False
    pending_update: PendingAction | None = None
    pending_model_list: PendingAction | None = None
    pending_local_skills: PendingAction | None = None
    pending_local_skill_import: PendingAction | None = None
    pending_local_skill_imports: Annotated[list[PendingAction], BeforeValidator(_none_is_empty)] = (
        Field(default_factory=list)
    )

    @property
    def gone(self) -> bool:
        """The server deleted the runtime (the socket's twin of a 404 `runtime not found`)."""
        return self.runtime_gone or self.status == RUNTIME_GONE


class HeartbeatAck(HeartbeatResponse):
    """`daemon:heartbeat_ack`: a heartbeat sent over the control WebSocket answered, naming
    its runtime and what the server can do on that connection (`rpc-v1`: requests over it)."""

    runtime_id: Text = ""
    server_capabilities: TextList = Field(default_factory=list)


class RenewResponse(WireModel):
    """Answer to `POST /api/tokens/current/renew`."""

    expires_at: Text = ""
    renewed: bool = False


def _object_or_none(value: Any) -> Any:
    return value if isinstance(value, dict) else None


WorkspaceSettings = Annotated[dict[str, Any] | None, BeforeValidator(_object_or_none)]
"""A workspace's settings as the server keeps them (None: it sent none, or not an object)."""


class Workspace(WireModel):
    """One workspace the daemon's token can serve."""

    id: str
    name: Text = ""


class RuntimeInfo(WireModel):
    """One backend found on this machine, as registered with the server."""

    name: str
    type: str
    version: Text = ""
    status: str = "online"
    profile_id: str | None = None
    """The custom runtime profile this runtime runs (None: a CLI found on this machine)."""


class FailedProfile(WireModel):
    """A custom runtime profile this machine cannot run, and why (the server shows it)."""

    profile_id: str
    command_name: str
    reason: str


class RuntimeProfile(WireModel):
    """A workspace's custom runtime: a CLI family driven through another command."""

    id: str
    display_name: Text = ""
    protocol_family: Text = ""
    command_name: Text = ""
    fixed_args: TextList = Field(default_factory=list)
    visibility: Text = ""
    enabled: Flag = False


class RuntimeProfiles(WireModel):
    """Answer to `GET /api/daemon/workspaces/{id}/runtime-profiles`: the enabled ones."""

    workspace_id: Text = ""
    runtime_profiles: Annotated[list[RuntimeProfile], BeforeValidator(_none_is_empty)] = Field(
        default_factory=list
    )


class RegisterRequest(WireModel):
    """Body of `POST /api/daemon/register`."""

    workspace_id: str
    daemon_id: str
    device_name: str
    cli_version: str
    runtimes: list[RuntimeInfo]
    legacy_daemon_ids: list[str] = Field(default_factory=list)
    """Ids this machine registered under before: the server folds their runtimes into ours."""
    failed_profiles: list[FailedProfile] = Field(default_factory=list)


class WorkspaceRepos(WireModel):
    """Answer to `GET /api/daemon/workspaces/{id}/repos`: the workspace's repository list, and
    its settings (whether commits get the co-author trailer)."""

    workspace_id: Text = ""
    repos: RepoList = Field(default_factory=list)
    repos_version: Text = ""
    settings: WorkspaceSettings = None


class RegisteredRuntime(WireModel):
    """A runtime the server created for one registered backend."""

    id: str
    name: Text = ""
    provider: Text = ""
    status: Text = ""
    profile_id: Text = ""
    """The custom runtime profile it is an instance of ("": a CLI found here)."""


class RegisterResponse(WireModel):
    """Answer to a registration: the server's runtime for each backend, the workspace's
    repositories."""

    runtimes: list[RegisteredRuntime]
    repos: RepoList = Field(default_factory=list)
    repos_version: Text = ""
    settings: WorkspaceSettings = None


class RecoverOrphansResponse(WireModel):
    """Answer to recover-orphans: tasks failed (and retried) after this runtime's crash."""

    orphaned: Count = 0
    retried: Count = 0


class HeartbeatRequest(WireModel):
    """Body of `POST /api/daemon/heartbeat`."""

    runtime_id: str
    supports_batch_import: bool = True
    """Hand this daemon every queued local skill import at once (it answers the batch field),
    not one per heartbeat: a user's imports are answered within one heartbeat, not one each."""


class OfflineReason(WireModel):
    """Why a runtime went offline, by runtime id in a deregister: a code clients switch on
    (`not_executable` is the one Multica's server refuses work for), the daemon's words, and
    the command that repairs the install when it knows one."""

    code: str
    detail: str = ""
    repair: dict[str, str] | None = None


class DeregisterRequest(WireModel):
    """Body of `POST /api/daemon/deregister`."""

    runtime_ids: list[str]
    offline_reasons: dict[str, OfflineReason] | None = None
