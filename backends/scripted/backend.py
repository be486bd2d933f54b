"""The `scripted` backend: a real child process replaying a script, for tests, demos, benchmarks.

The task prompt is the script, a JSON object `{"steps": [...]}` (it may also sit inside other
prompt text). A prompt without a script is simply echoed: one `text` message and a `result`
whose output is the prompt. Each step is an object with exactly one key:

    {"emit": {"type": "text", "content": "hi"}}   print one message of the line protocol
                                                   (`backends.command.lineproto`)
    {"text": "hi"}                                 shorthand for emitting a text message
    {"sleep": 1.5}                                 stay silent for that many seconds
    {"burst": {"count": 1000, "message": {...}}}   print the message N times, as fast as possible
    {"tool": {"name": "Bash", "call_id": "c1",     tool_use, `seconds` of silence, tool_result
              "input": {"command": "make"},        (`call_id` defaults to a fresh id, `input`
              "seconds": 5, "output": "ok"}}        to {}, `seconds` to 0, `output` to "")
    {"ignore_sigterm": true}                       from now on (and in trees spawned later)
    {"spawn_tree": {"setsid": true, "depth": 2}}   a grandchild in its own session with a chain
                                                   below it (`depth` processes, all sleeping);
                                                   logs `{"type": "log", "content": "tree <pid>
                                                   <pid>"}`. `"hold_stdout": true` lets the
                                                   tree inherit stdout/stderr like a real tool.
    {"stderr": "warning: ..."}                     write a line to stderr
    {"result": {"output": "done", "session_id": "s1", "usage": {...}}}   the final result line
                                                   (add `"error": "..."` for a failed result)
    {"hang": true}                                 sleep forever (until killed)
    {"end_if_resumed": true}                       when the run resumes a session, name it
                                                   (a `status`) and end with the result
                                                   `resumed <session>`; else go on
    {"exit": 3}                                    exit with that code now
    {"crash": "SIGSEGV"}                           die by that signal (no core file)

A script that ends without `exit` exits 0. Every line is flushed as it is written. A malformed
script is rejected before any step runs: an `error` message, the reason on stderr, exit 2.

In Python, `Script` builds the same JSON:

    prompt = (
        Script()
        .text("working")
        .tool("Bash", call_id="c1", input={"command": "make"}, seconds=2, output="ok")
        .result("done", session_id="s1")
        .dumps()
    )
"""

from __future__ import annotations

import json
import sys
from contextlib import AbstractAsyncContextManager
from importlib import metadata
from pathlib import Path
from typing import Any

from backends.base import RunSpec
from backends.command.lineproto import run_line_agent
from backends.process import ProcessRun
from backends.scripted import child

SCRIPT_FORMAT = 1


class ScriptedBackend:
    """Replays the prompt's script in a real child process, through the line protocol."""

    def __init__(self, name: str = "scripted") -> None:
        self.name = name

    async def detect(self) -> str | None:
        """Always available: the package version and the script format version."""
        try:
            version = metadata.version("agent-daemon")
        except metadata.PackageNotFoundError:
            version = "dev"
        return f"{version} (script format {SCRIPT_FORMAT})"

    def start(self, spec: RunSpec) -> AbstractAsyncContextManager[ProcessRun]:
        """Start the scripted child with the prompt on stdin (then closed)."""
        # Run by file path with -P: the work directory can neither shadow the module nor
        # needs the package on the agent's PYTHONPATH.
        argv = [sys.executable, "-P", str(Path(child.__file__).resolve())]
        if spec.resume_session_id:
            argv += ["--resume", spec.resume_session_id]
        return run_line_agent(argv, spec, self.name)


class Script:
    """Builds a script step by step; `dumps()` gives the prompt for the scripted backend."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []

    def dumps(self) -> str:
        """The script as the JSON prompt."""
        return json.dumps({"steps": self.steps})

    def _add(self, kind: str, arg: Any) -> Script:
        self.steps.append({kind: arg})
        return self

    def emit(self, type: str, **fields: Any) -> Script:
        """Print one line-protocol message of `type` with `fields`."""
        return self._add("emit", {"type": type, **fields})

    def text(self, content: str) -> Script:
        """Print a text message."""
        return self._add("text", content)

    def sleep(self, seconds: float) -> Script:
        """Stay silent."""
        return self._add("sleep", seconds)

    def burst(self, count: int, message: dict[str, Any] | None = None) -> Script:
        """Print `message` (default: a text message) `count` times as fast as possible."""
        return self._add("burst", {"count": count, "message": message or {"type": "text"}})

    def tool(
        self,
        name: str,
        call_id: str = "",
        input: dict[str, Any] | None = None,
        seconds: float = 0,
        output: str = "",
    ) -> Script:
        """A tool call: tool_use, `seconds` of silence, tool_result."""
        step: dict[str, Any] = {"name": name, "input": input or {}, "seconds": seconds}
        step["output"] = output
        if call_id:
            step["call_id"] = call_id
        return self._add("tool", step)

    def ignore_sigterm(self) -> Script:
        """Ignore SIGTERM from here on (only SIGKILL ends the process)."""
        return self._add("ignore_sigterm", True)

    def spawn_tree(self, depth: int = 2, setsid: bool = True, hold_stdout: bool = False) -> Script:
        """Start a sleeping process chain; its pids arrive in a `log` message `tree <pid>…`."""
        return self._add(
            "spawn_tree", {"depth": depth, "setsid": setsid, "hold_stdout": hold_stdout}
        )

    def stderr(self, text: str) -> Script:
        """Write a line to stderr."""
        return self._add("stderr", text)

    def result(self, output: str = "", **fields: Any) -> Script:
        """The final result line (`session_id`, `usage`, `error` as keyword arguments)."""
        return self._add("result", {"output": output, **fields})

    def hang(self) -> Script:
        """Sleep forever."""
        return self._add("hang", True)

    def end_if_resumed(self) -> Script:
        """When resuming a session: name it and end with `resumed <session>`; else go on."""
        return self._add("end_if_resumed", True)

    def exit(self, code: int) -> Script:
        """Exit with `code`."""
        return self._add("exit", code)

    def crash(self, signal_name: str = "SIGSEGV") -> Script:
        """Die by a signal."""
        return self._add("crash", signal_name)
