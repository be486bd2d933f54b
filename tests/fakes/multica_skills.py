"""Skills by reference on the Multica-faithful server (`skill-bundles-v1`, Go `daemon.go`).

A claim whose request names the capability in `X-Client-Capabilities` carries each of the
agent's skills as a reference (id, source, hash, size, file count) in `agent.skill_refs`,
without the skills; `POST /api/daemon/runtimes/{rid}/tasks/{tid}/skill-bundles/resolve` then
serves one skill's current bundle. The hash is Multica's manifest hash (pinned to Go's output
in tests/daemon/task/test_skill_bundles.py). Test controls: `fake.skill_edits` replaces a
skill's content between claim and resolve; `fake.bundle_tamper` corrupts what resolve sends;
`fake.skills_by_reference = False` sends skills whole, as a server before the capability did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from daemon.protocol.models import Skill
from daemon.task.setup.skill_manifest import manifest
from tests.fakes.multica_routes import SeenRequest, error, route_of

if TYPE_CHECKING:
    from tests.fakes.multica_server import MulticaFake

CAPABILITY = "skill-bundles-v1"


def _bundle(skill: dict[str, Any]) -> dict[str, Any]:
    full = {"source": "workspace", "description": "", "files": [], **skill}
    digest, size, _ = manifest(Skill.model_validate(full))
    return {**full, "hash": digest, "size_bytes": size}


def for_claim(fake: MulticaFake, body: dict[str, Any], capabilities: str) -> dict[str, Any]:
    """The claim body as a daemon with or without the capability (its `X-Client-Capabilities`
    header, on the claim or the control connection) gets it."""
    wanted = {c.strip() for c in capabilities.split(",")}
    skills = body["agent"].get("skills") or []
    if CAPABILITY not in wanted or not skills or not fake.skills_by_reference:
        return body
    refs = []
    for skill in skills:
        bundle = _bundle(skill)
        refs.append(
            {
                "id": bundle["id"],
                "source": bundle["source"],
                "name": bundle["name"],
                "hash": bundle["hash"],
                "size_bytes": bundle["size_bytes"],
                "file_count": len(bundle["files"]),
            }
        )
    agent = {k: v for k, v in body["agent"].items() if k != "skills"}
    return {**body, "agent": {**agent, "skill_refs": refs}}


class SkillHandlers:
    """`ResolveTaskSkillBundles`: one bundle per request, the agent's current version."""

    def __init__(self, fake: MulticaFake) -> None:
        self.fake = fake

    async def resolve(self, request: Request) -> JSONResponse:
        body = await request.json()
        path = request.url.path
        self.fake.requests.append(SeenRequest(route_of(path), path, body))
        if self.fake.token and request.headers.get("authorization") != f"Bearer {self.fake.token}":
            return error(401, "invalid token")
        task = self.fake.tasks.get(request.path_params["tid"])
        if task is None or task.runtime_id != request.path_params["rid"]:
            return error(404, "task not found")
        asked = (body.get("skills") or [{}])[0]
        for skill in task.agent.get("skills") or []:
            current = {**skill, **self.fake.skill_edits.get(skill["id"], {})}
            bundle = _bundle(current)
            if (bundle["source"], bundle["id"]) == (asked.get("source"), asked.get("id")):
                if self.fake.bundle_tamper:
                    bundle["content"] += "\nrm -rf /"
                return JSONResponse({"bundles": [bundle]})
        return error(404, "skill not found")
