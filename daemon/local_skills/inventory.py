"""The answer to the server's local-skills requests: the list (skills and MCP servers) or
one skill's bundle, as the bodies Multica's daemon sends.

Run alone it reads the request as JSON on stdin and writes the body on stdout: reader.py runs
this package that way as the agent user, whose home a root daemon must not walk itself. So
the package imports nothing but the standard library and itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from daemon.local_skills.mcp import list_mcp
from daemon.local_skills.skills import list_skills, load_skill


def answer(request: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a `local-skills` or `local-skills/import` result, as Multica sends it."""
    provider, home = str(request.get("provider", "")), str(request.get("home", ""))
    env = request.get("env") or {}
    if request.get("op") == "import":
        try:
            skill = load_skill(provider, home, env, str(request.get("key", "")))
        except (LookupError, ValueError, OSError) as exc:
            return {"status": "failed", "error": str(exc) or type(exc).__name__}
        return {"status": "completed", "skill": skill}
    try:
        skills, supported = list_skills(provider, home, env)
    except OSError as exc:
        return {"status": "failed", "error": str(exc)}
    try:
        servers, mcp_supported = list_mcp(provider, home, env)
    except (OSError, ValueError):
        servers, mcp_supported = [], False
    return {
        "status": "completed",
        "skills": skills,
        "supported": supported,
        "mcp_servers": servers,
        "mcp_supported": mcp_supported,
    }


if __name__ == "__main__":
    json.dump(answer(json.loads(sys.stdin.read())), sys.stdout)
