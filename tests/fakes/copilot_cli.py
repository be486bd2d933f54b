"""A stand-in `copilot` executable written by a test: it answers `--version` as Copilot CLI
does, and otherwise plays a script — an output line (a string), or a pause of so many seconds
(a number) — then exits 0. Its lines are the shapes of tests/fixtures/copilot. Also the
environment that runs the real CLI offline (`copilot_env`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

VERSION = "1.0.102"
SESSION = "5b7e3c1a-2d4f-4a6b-9c8d-7e6f5a4b3c2d"

_SCRIPT = """#!{python}
import sys, time
if "--version" in sys.argv:
    print("GitHub Copilot CLI {version}.", flush=True)
    sys.exit(0)
for step in {steps!r}:
    if isinstance(step, str):
        print(step, flush=True)
    else:
        time.sleep(step)
"""


def write_copilot(path: Path, steps: Sequence[str | float]) -> Path:
    """Install the fake at `path`, playing `steps`."""
    path.write_text(_SCRIPT.format(python=sys.executable, version=VERSION, steps=list(steps)))
    path.chmod(0o755)
    return path


def event(kind: str, **data: Any) -> str:
    """One envelope line of type `kind`."""
    return json.dumps({"type": kind, "data": data, "id": f"{kind}-1", "timestamp": "t"})


def turn(n: int) -> str:
    return event("assistant.turn_start", turnId=str(n))


def answer(text: str) -> str:
    return event("assistant.message", messageId="m", content=text, toolRequests=[])


def shell(call: str, command: str) -> list[str]:
    """The lines that start a `bash` call (message, then execution start)."""
    arguments = {"command": command}
    request = {"toolCallId": call, "name": "bash", "arguments": arguments, "type": "function"}
    return [
        event("assistant.message", messageId="m", content="", toolRequests=[request]),
        event("tool.execution_start", toolCallId=call, toolName="bash", arguments=arguments),
    ]


def shell_done(call: str, output: str) -> str:
    return event(
        "tool.execution_complete", toolCallId=call, success=True, result={"content": output}
    )


def result(code: int = 0) -> str:
    return json.dumps({"type": "result", "sessionId": SESSION, "exitCode": code})


# Not a real key: Copilot CLI masks its provider key's value wherever it appears in its
# output, so a short one ("x") would mangle every event name holding that letter.
FAKE_KEY = "sk-fake-copilot-tests"


def copilot_env(root: Path, base_url: str) -> dict[str, str]:
    """The environment that runs the real CLI offline against a fake Chat Completions API
    (`tests/fakes/chat_api.py`): its own provider, no GitHub login, no update check."""
    return {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(root / "home"),
        "COPILOT_OFFLINE": "true",
        "COPILOT_PROVIDER_BASE_URL": f"{base_url}/v1",
        "COPILOT_PROVIDER_API_KEY": FAKE_KEY,
        "COPILOT_MODEL": "fake-chat",
        "COPILOT_AUTO_UPDATE": "false",
    }
