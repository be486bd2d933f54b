"""A workspace's custom runtime profiles, as this machine can run them.

A profile (Multica's Runtimes page, `GET /api/daemon/workspaces/{id}/runtime-profiles`, the
enabled ones) names a CLI family the daemon drives (`protocol_family`: `claude`, `codex`,
...), the command to run in its place (`command_name`, looked up on PATH) and the words every
run of it starts with (`fixed_args`, a launch prefix: `ccms start q36`). Each profile this
machine can run becomes a runtime of that family's backend, registered with its `profile_id`
as `<display name> (<device>)`; each it cannot gets a `failed_profiles` entry saying why, which
the server shows on the profile. As Multica's daemon decides:

- a family the daemon does not drive: `unsupported protocol_family: <family>`;
- a per-machine path (`multica runtime profile set-path`: the CLI config's
  `profile_command_overrides`) wins when it is an executable file; one that is not is said in
  the reason and PATH is looked up instead;
- a command PATH does not find: `command not found on PATH: <command>`;
- a profile without a command or a family is skipped (logged).

The version is the command's `--version` after its prefix (`ccms start q36 --version` is the
wrapped CLI's), asked as the agents run, best effort: a profile is registered without one, and
no minimum applies. The set's signature (a hash of what registering reads) tells a change
notice from a repeated one.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from backends.agent_cli import AgentCli
from backends.base import Backend
from daemon.errors import ServerError
from daemon.protocol.client import ServerClient
from daemon.protocol.runtime_models import FailedProfile, RuntimeInfo, RuntimeProfile

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProfileRuntime:
    """One profile this machine runs: what is registered, and the backend its tasks run on."""

    profile_id: str
    info: RuntimeInfo
    backend: Backend


@dataclass(frozen=True, slots=True)
class ProfileSet:
    """A workspace's profiles as this machine runs them; `signature` None: not fetched."""

    signature: str | None
    runtimes: tuple[ProfileRuntime, ...] = ()
    failed: tuple[FailedProfile, ...] = ()


NOT_FETCHED = ProfileSet(None)


class Profiles:
    """Fetches a workspace's profiles and makes each a runtime of its family's backend."""

    def __init__(
        self,
        client: ServerClient,
        families: Callable[[], Mapping[str, Backend]],
        overrides: Mapping[str, str],
        device: str,
    ) -> None:
        """`families`: every backend the daemon drives, by runtime type (a profile's backend is
        a copy of its family's); `overrides`: the CLI config's paths by profile id."""
        self._client = client
        self._families = families
        self._overrides = dict(overrides)
        self._device = device

    async def fetch(self, workspace_id: str) -> list[RuntimeProfile] | None:
        """The enabled profiles; None when the server did not say (an older one has no
        route: a 404), so what was registered stays as it is."""
        try:
            answer = await self._client.runtime_profiles(workspace_id)
        except ServerError as exc:
            log.info("workspace %s: custom runtime profiles not read: %s", workspace_id, exc)
            return None
        return answer.runtime_profiles

    async def of(self, workspace_id: str) -> ProfileSet:
        """The workspace's profiles, fetched and made runtimes."""
        profiles = await self.fetch(workspace_id)
        return NOT_FETCHED if profiles is None else await self.build(workspace_id, profiles)

    async def build(self, workspace_id: str, profiles: Sequence[RuntimeProfile]) -> ProfileSet:
        """Each profile as a runtime of this machine, or a failure saying why."""
        # Only for a profile: building them all imports the backend of every CLI not found.
        families = self._families() if profiles else {}
        runtimes: list[ProfileRuntime] = []
        failed: list[FailedProfile] = []
        for profile in profiles:
            family, command = profile.protocol_family.strip(), profile.command_name.strip()
            if not family or not command:
                log.warning(
                    "workspace %s: profile %s has no command or family: skipped",
                    workspace_id,
                    profile.id,
                )
                continue
            template = families.get(family)
            if not isinstance(template, AgentCli):
                reason = f"unsupported protocol_family: {family}"
                failed.append(
                    FailedProfile(profile_id=profile.id, command_name=command, reason=reason)
                )
                continue
            path, reason = self._resolve(profile, template)
            if path is None:
                failed.append(
                    FailedProfile(profile_id=profile.id, command_name=command, reason=reason)
                )
                log.info(
                    "workspace %s: profile %s not run here: %s", workspace_id, profile.id, reason
                )
                continue
            backend = template.for_profile(path, profile.fixed_args)
            version = await backend.detect() or ""
            name = profile.display_name or command
            info = RuntimeInfo(
                name=f"{name} ({self._device})" if self._device else name,
                type=family,
                version=version,
                profile_id=profile.id,
            )
            log.info(
                "workspace %s: profile %s runs %s as %s (%s)",
                workspace_id,
                profile.id,
                " ".join(backend.command()),
                family,
                version or "no version",
            )
            runtimes.append(ProfileRuntime(profile.id, info, backend))
        return ProfileSet(signature(profiles), tuple(runtimes), tuple(failed))

    def _resolve(self, profile: RuntimeProfile, template: AgentCli) -> tuple[str | None, str]:
        """The executable to run (or None) and, when a step failed, why."""
        reasons: list[str] = []
        override = self._overrides.get(profile.id, "").strip()
        if override:
            if os.path.isfile(override) and os.access(override, os.X_OK):
                return override, ""
            reasons.append(f"Configured path override is not executable: {override}")
            log.warning("profile %s: path %s is not executable; PATH used", profile.id, override)
        found = template.for_profile(profile.command_name.strip(), ()).resolve()
        if found is not None:
            return found, ""
        reasons.append(f"command not found on PATH: {profile.command_name.strip()}")
        return None, "; ".join(reasons)


def signature(profiles: Sequence[RuntimeProfile]) -> str:
    """What registering reads of a profile set, hashed, whatever order it came in."""
    digest = hashlib.sha256()
    for p in sorted(profiles, key=lambda p: p.id):
        fields = (p.id, str(p.enabled), p.protocol_family, p.command_name, p.visibility)
        digest.update("\x1f".join((*fields, *p.fixed_args)).encode() + b"\x1e")
    return digest.hexdigest()
