"""Reading a runtime's local skills and MCP servers for the server, each read bounded.

For the daemon's own user, the inventory (`inventory.answer`) runs in a worker thread. With
an agent user (`MULTICA_AGENT_USER`), the homes to read are that user's, and a root daemon
that walked them would follow whatever links the user planted: so the read is handed to the
user's identity (`daemon.boundary.beneath.run_as`), a Python child started with `-I` that is
given this package's source on stdin — it needs no access to the daemon's own files — and
answers with the body as JSON. That answer is the agent user's to shape: it is read with the
daemon's JSON limits and sent on only when it is a result Multica knows.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Mapping
from typing import Any

import anyio

from backends.process.identity import AgentUser
from daemon.boundary.beneath import run_as
from daemon.errors import MalformedInputError
from daemon.local_skills import inventory, mcp, roots, skills
from daemon.local_skills.interpreter import interpreter_for
from daemon.protocol.jsonin import loads

log = logging.getLogger(__name__)

READ_TIMEOUT = 30.0
"""Seconds a read may take (Multica's server gives the request 60)."""
ANSWER_LIMIT = 64 << 20
"""The most a child's answer may be (an 8 MiB bundle, escaped as JSON)."""
_MODULES = (roots, skills, mcp, inventory)
# The child: register each module from its source (packages first), then answer.
_BOOT = """
import json, sys, types
given = json.loads(sys.stdin.read())
for name in ("daemon", "daemon.local_skills"):
    package = types.ModuleType(name)
    package.__path__ = []
    sys.modules[name] = package
for name, source in given["modules"]:
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(source, name, "exec"), module.__dict__)
json.dump(sys.modules["daemon.local_skills.inventory"].answer(given["request"]), sys.stdout)
"""


class LocalInventory:
    """Answers the server's local-skills requests for this machine's runtimes."""

    def __init__(self, base_env: Mapping[str, str], user: AgentUser | None = None) -> None:
        """`base_env` is the environment agents start from; `user` the one they run as."""
        self._user = user
        self._env = dict(user.environ(base_env) if user is not None else base_env)

    async def listing(self, provider: str) -> dict[str, Any]:
        """The provider's skills and MCP servers, as a `local-skills` result."""
        return await self._answer({"op": "list", "provider": provider})

    async def bundle(self, provider: str, key: str) -> dict[str, Any]:
        """One skill's bundle, as a `local-skills/import` result."""
        return await self._answer({"op": "import", "provider": provider, "key": key})

    async def _answer(self, request: dict[str, Any]) -> dict[str, Any]:
        request = {**request, "home": self._env.get("HOME", ""), "env": self._env}
        with anyio.move_on_after(READ_TIMEOUT + 5):
            if self._user is None:
                return await anyio.to_thread.run_sync(inventory.answer, request)
            raw = await anyio.to_thread.run_sync(self._as_user, self._user, request)
            return _checked(raw, self._user.name)
        return {"status": "failed", "error": f"local skills not read within {READ_TIMEOUT:g}s"}

    def _as_user(self, user: AgentUser, request: dict[str, Any]) -> bytes | None:
        modules = [(m.__name__, inspect.getsource(m)) for m in _MODULES]
        given = json.dumps({"modules": modules, "request": request}).encode()
        python = interpreter_for(user)
        if python is None:
            return None
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "HOME": user.home}
        return run_as(user, [python, "-I", "-c", _BOOT], given, env, READ_TIMEOUT, ANSWER_LIMIT)


def _checked(raw: bytes | None, who: str) -> dict[str, Any]:
    """The child's answer when it is a result Multica knows, else a failed one."""
    if raw is None:
        return {"status": "failed", "error": f"local skills could not be read as {who}"}
    try:
        body = loads(raw, limit=ANSWER_LIMIT, what="local skills answer")
    except MalformedInputError as exc:
        log.warning("local skills answer read as %s is not JSON: %s", who, exc)
        return {"status": "failed", "error": "local skills answer was not readable"}
    if not isinstance(body, dict) or body.get("status") not in ("completed", "failed"):
        return {"status": "failed", "error": "local skills answer was not a result"}
    return body
