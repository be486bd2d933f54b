"""Custom runtime profiles on the Multica-faithful server (Go `runtime_profile.go`,
`DaemonRegister`, `daemonws/hub.go`).

`GET /api/daemon/workspaces/{id}/runtime-profiles` answers the workspace's enabled profiles
(`{workspace_id, runtime_profiles}`, oldest first). A register entry naming a `profile_id` is
an instance of that profile: an unknown profile is a 400 `unknown runtime profile: <id>`, a
disabled one a 409 `runtime profile is disabled: <id>`, and its provider is the profile's
family whatever the daemon said; one row per (workspace, daemon, profile), beside the
daemon's built-in rows. A `failed_profiles` entry upserts the same row offline, with the
reason in its metadata, and is not in the answer. A profile created, edited, disabled or
deleted pushes `daemon:runtime_profiles_changed` to the connections watching a runtime of
its workspace.

    profile_id = fake.add_profile("Wrapped Claude", "claude", "ccms", ["start", "q36"])
    fake.edit_profile(profile_id, enabled=False)      # pushes the frame
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from tests.fakes.multica_routes import FakeRuntime, SeenRequest, error, route_of

if TYPE_CHECKING:
    from tests.fakes.multica_server import MulticaFake


@dataclass
class FakeProfile:
    """One `runtime_profile` row."""

    id: str
    workspace_id: str
    display_name: str
    protocol_family: str
    command_name: str
    fixed_args: list[str] = field(default_factory=list)
    enabled: bool = True

    def body(self) -> dict[str, Any]:
        """`RuntimeProfileResponse`."""
        return {
            "id": self.id,
            "workspace_id": self.workspace_id,
            "display_name": self.display_name,
            "protocol_family": self.protocol_family,
            "command_name": self.command_name,
            "description": None,
            "fixed_args": list(self.fixed_args),
            "visibility": "workspace",
            "created_by": None,
            "enabled": self.enabled,
            "created_at": "",
            "updated_at": "",
        }


class ProfileControls:
    """The profile part of the fake's state and its test controls (mixed into `MulticaFake`)."""

    profiles: dict[str, FakeProfile]
    profiles_route: bool
    workspaces: dict[str, str]

    def add_profile(
        self: MulticaFake,
        display_name: str,
        family: str,
        command: str,
        fixed_args: list[str] | None = None,
        *,
        workspace_id: str = "",
        enabled: bool = True,
    ) -> str:
        """Create a profile as an admin would on the Runtimes page; return its id."""
        profile = FakeProfile(
            str(uuid.uuid4()),
            workspace_id or self.workspace_id,
            display_name,
            family,
            command,
            list(fixed_args or []),
            enabled,
        )
        self.profiles[profile.id] = profile
        self.profiles_changed(profile)
        return profile.id

    def edit_profile(self: MulticaFake, profile_id: str, **changes: Any) -> None:
        """Change a profile's fields (`enabled=False` disables it), and say so."""
        profile = self.profiles[profile_id]
        for name, value in changes.items():
            setattr(profile, name, value)
        self.profiles_changed(profile)

    def delete_profile(self: MulticaFake, profile_id: str) -> None:
        """Delete a profile: its runtimes with it (Go tears them down), and say so."""
        profile = self.profiles.pop(profile_id)
        for runtime in self.runtimes.values():
            if runtime.profile_id == profile_id:
                runtime.deleted = True
        self.profiles_changed(profile)

    def profiles_changed(self: MulticaFake, profile: FakeProfile) -> None:
        """`NotifyRuntimeProfilesChanged`: to every connection watching a runtime of the
        profile's workspace."""
        frame = {
            "type": "daemon:runtime_profiles_changed",
            "payload": {"workspace_id": profile.workspace_id, "runtime_profile_id": profile.id},
        }
        watched = {r.id for r in self.live_runtimes(profile.workspace_id)}
        for runtime_ids, stream in list(self.watchers):
            if runtime_ids & watched:
                try:
                    stream.send_nowait(frame)
                except Exception:  # a full or closed queue: the hub drops that client
                    continue

    def profile_runtime(self: MulticaFake, profile_id: str) -> FakeRuntime | None:
        """The live runtime registered for a profile (or recorded as failed), if any."""
        found = [r for r in self.live_runtimes() if r.profile_id == profile_id]
        return found[0] if found else None


class ProfileHandlers:
    """`DaemonListRuntimeProfiles`, and the profile half of `DaemonRegister`."""

    def __init__(self, fake: MulticaFake) -> None:
        self.fake = fake

    async def list(self, request: Request) -> JSONResponse:
        path = request.url.path
        self.fake.requests.append(SeenRequest(route_of(path), path, None))
        if self.fake.token and request.headers.get("authorization") != f"Bearer {self.fake.token}":
            return error(401, "invalid token")
        workspace_id = request.path_params["wid"]
        if not self.fake.profiles_route:
            return error(404, "404 page not found")
        if workspace_id not in self.fake.workspaces:
            return error(404, "workspace not found")
        enabled = [
            p.body()
            for p in self.fake.profiles.values()
            if p.workspace_id == workspace_id and p.enabled
        ]
        return JSONResponse({"workspace_id": workspace_id, "runtime_profiles": enabled})
