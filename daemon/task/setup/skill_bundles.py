"""Skills sent by reference (`skill-bundles-v1`), resolved before the agent starts, as Go's
`ensureTaskSkillBundles` resolves them.

A claim to a daemon that names the capability carries `agent.skill_refs` (id, source, hash,
size, file count) instead of whole skills. Each reference is looked up in the owner-only cache
(skill_cache.py), and each miss fetched alone — one request per skill, so a slow link makes
progress skill by skill and every fetched bundle is cached at once:

    POST /api/daemon/runtimes/{runtime}/tasks/{task}/skill-bundles/resolve
         {"skills": [ref]}  ->  {"bundles": [bundle]}

A bundle is checked before it is used or cached: it is the skill asked for (same source and
id), and its content hashes, as Multica's `skillbundle.BuildManifest` hashes it, to the hash
it states (the server may send a newer version than the claim named, which is why the check is
against the bundle's own hash). The resolved bundles then stand in for the agent's skills,
written where its CLI finds them like inline ones. A skill that cannot be resolved fails the
task: the agent must not run without the skills it was given.
"""

from __future__ import annotations

import logging

from daemon.errors import DaemonError, ServerError
from daemon.logs import short_id
from daemon.protocol.api import TaskServer
from daemon.protocol.models import Skill, SkillRef, Task
from daemon.task.setup.skill_cache import SkillBundleCache
from daemon.task.setup.skill_manifest import matches, self_ref

log = logging.getLogger(__name__)

PLUGIN_SOURCE = "plugin"


class SkillBundleError(DaemonError):
    """A skill the task names by reference could not be resolved."""


async def resolve_skills(client: TaskServer, task: Task, cache: SkillBundleCache | None) -> Task:
    """The task with its referenced skills resolved into `agent.skills` (unchanged when the
    claim named none); SkillBundleError when one cannot be had."""
    refs = task.agent.skill_refs
    if not refs:
        return task
    skills: list[Skill] = []
    fetched = 0
    for ref in refs:
        bundle = cache.load(task.workspace_id, ref) if cache else None
        if bundle is None:
            bundle = await _fetch(client, task, ref)
            fetched += 1
            if cache is not None:
                try:
                    cache.store(task.workspace_id, bundle)
                except OSError as exc:
                    log.warning("skill cache: cannot store %s: %s", ref.name or ref.id, exc)
        skills.append(bundle)
    log.info(
        "task %s: %d skills by reference (%d fetched, %d cached)",
        short_id(task.id),
        len(refs),
        fetched,
        len(refs) - fetched,
    )
    agent = task.agent.model_copy(update={"skills": skills})
    return task.model_copy(update={"agent": agent})


async def _fetch(client: TaskServer, task: Task, ref: SkillRef) -> Skill:
    try:
        bundle = await client.resolve_skill_bundle(task.runtime_id, task.id, ref)
    except ServerError as exc:
        raise SkillBundleError(
            f"skill {ref.name or ref.id!r} ({ref.size_bytes} bytes) is unavailable: {exc}"
        ) from exc
    if (bundle.source, bundle.id) != (ref.source, ref.id):
        raise SkillBundleError(f"skill {ref.name or ref.id!r}: the server sent another skill")
    # The server serves the skill's current version, which may be newer than the claim's ref:
    # check it against itself (a plugin's against the ref, as Go does).
    expected = ref if ref.source == PLUGIN_SOURCE else self_ref(bundle)
    if not matches(expected, bundle):
        raise SkillBundleError(f"skill {ref.name or ref.id!r}: the bundle does not match its hash")
    return bundle
