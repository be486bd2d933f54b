"""The scripted agent: a real child process that replays a script read from stdin.

The script format is documented in `backends.scripted`. This module uses the standard library
only, so it runs from any work directory and environment (`python -P path/to/it`).
`--tree DEPTH FD` is an internal mode: one sleeping node of a `spawn_tree` step.
"""

from __future__ import annotations

import json
import os
import re
import resource
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

_SCRIPT_START = re.compile(r'\{\s*"steps"\s*:')
_BURST_BATCH = 1000


class ScriptError(ValueError):
    """The prompt is a script, but not a valid one."""


def main(argv: list[str]) -> int:
    """Replay the script on stdin; returns the exit code."""
    if argv[:1] == ["--tree"]:
        _tree_node(int(argv[1]), int(argv[2]))
    resume = argv[argv.index("--resume") + 1] if "--resume" in argv[:-1] else ""
    prompt = sys.stdin.buffer.read().decode("utf-8", errors="replace")
    script = find_script(prompt)
    if script is None:
        session = resume or f"scripted-{secrets.token_hex(6)}"
        _emit({"type": "text", "content": prompt})
        _emit({"type": "result", "output": prompt, "session_id": session})
        return 0
    try:
        steps = check_steps(script)
    except ScriptError as exc:
        _emit({"type": "error", "content": f"bad script: {exc}"})
        print(f"bad script: {exc}", file=sys.stderr, flush=True)
        return 2
    return _run(steps, resume)


def find_script(prompt: str) -> dict[str, Any] | None:
    """The `{"steps": ...}` object in the prompt (the whole prompt, or embedded in text)."""
    match = _SCRIPT_START.search(prompt)
    if match is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(prompt, match.start())
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def check_steps(script: dict[str, Any]) -> list[tuple[str, Any]]:
    """Validate the whole script before running any of it; returns (kind, argument) pairs."""
    steps = script.get("steps")
    if not isinstance(steps, list):
        raise ScriptError('"steps" must be a list')
    checked = []
    for number, step in enumerate(steps, start=1):
        if not isinstance(step, dict) or len(step) != 1:
            raise ScriptError(f"step {number}: must be an object with exactly one key")
        ((kind, arg),) = step.items()
        if kind not in _RULES:
            known = ", ".join(_RULES)
            raise ScriptError(f"step {number}: unknown step {kind!r} (known: {known})")
        valid, expected = _RULES[kind]
        if not valid(arg):
            got = json.dumps(arg)[:80]
            raise ScriptError(f"step {number} ({kind}): expected {expected}, got {got}")
        checked.append((kind, arg))
    return checked


def _is_seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _is_count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _is_burst(arg: Any) -> bool:
    return (
        isinstance(arg, dict)
        and _is_count(arg.get("count"), 0)
        and isinstance(arg.get("message"), dict)
    )


def _is_tool(arg: Any) -> bool:
    return (
        isinstance(arg, dict)
        and isinstance(arg.get("name"), str)
        and isinstance(arg.get("call_id", ""), str)
        and isinstance(arg.get("input", {}), dict)
        and _is_seconds(arg.get("seconds", 0))
    )


def _is_tree(arg: Any) -> bool:
    return isinstance(arg, dict) and _is_count(arg.get("depth", 2), 1)


_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "emit": (lambda a: isinstance(a, dict), "a line-protocol message object"),
    "text": (lambda a: isinstance(a, str), "a string"),
    "sleep": (_is_seconds, "a number of seconds >= 0"),
    "burst": (_is_burst, '{"count": N >= 0, "message": {...}}'),
    "tool": (_is_tool, '{"name": "...", "call_id"?, "input"?: {...}, "seconds"?, "output"?}'),
    "ignore_sigterm": (lambda a: a is True, "true"),
    "spawn_tree": (_is_tree, '{"setsid"?: true, "depth"?: N >= 1, "hold_stdout"?: false}'),
    "stderr": (lambda a: isinstance(a, str), "a string"),
    "result": (lambda a: isinstance(a, dict), "an object with the result's fields"),
    "hang": (lambda a: a is True, "true"),
    "end_if_resumed": (lambda a: a is True, "true"),
    "exit": (lambda a: _is_count(a, 0) and a <= 255, "an exit code 0..255"),
    "crash": (lambda a: isinstance(a, str) and _signal(a) is not None, 'a signal name ("SIGSEGV")'),
}


def _run(steps: list[tuple[str, Any]], resume: str = "") -> int:
    for kind, arg in steps:
        match kind:
            case "end_if_resumed" if resume:
                _emit({"type": "status", "content": f"resumed {resume}", "session_id": resume})
                _emit({"type": "result", "output": f"resumed {resume}", "session_id": resume})
                return 0
            case "emit":
                _emit(arg)
            case "text":
                _emit({"type": "text", "content": arg})
            case "sleep":
                time.sleep(arg)
            case "burst":
                _burst(arg["message"], arg["count"])
            case "tool":
                _tool(arg)
            case "ignore_sigterm":
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            case "spawn_tree":
                _spawn_tree(arg)
            case "stderr":
                sys.stderr.write(arg if arg.endswith("\n") else arg + "\n")
                sys.stderr.flush()
            case "result":
                _emit({**arg, "type": "result"})
            case "hang":
                _sleep_forever()
            case "exit":
                return int(arg)
            case "crash":
                _crash(arg)
    return 0


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def _burst(message: dict[str, Any], count: int) -> None:
    line = json.dumps(message).encode() + b"\n"
    while count > 0:
        batch = min(count, _BURST_BATCH)
        sys.stdout.buffer.write(line * batch)
        count -= batch
    sys.stdout.buffer.flush()


def _tool(arg: dict[str, Any]) -> None:
    call_id = arg.get("call_id") or f"call-{secrets.token_hex(4)}"
    _emit(
        {"type": "tool_use", "tool": arg["name"], "call_id": call_id, "input": arg.get("input", {})}
    )
    time.sleep(arg.get("seconds", 0))
    result = {"type": "tool_result", "call_id": call_id, "output": str(arg.get("output", ""))}
    if arg.get("is_error") is True:
        result["is_error"] = True
    _emit(result)


_TREE: list[subprocess.Popen[bytes]] = []  # the nodes are never waited for: they outlive us


def _spawn_tree(arg: dict[str, Any]) -> None:
    """Start a sleeping chain of `depth` processes below this one and log their pids."""
    # By default the tree gets /dev/null, so it does not hold the agent's stdout open;
    # `hold_stdout` makes it inherit stdout and stderr, as a real tool's children do.
    out = None if arg.get("hold_stdout") else subprocess.DEVNULL
    pids = _start_node(int(arg.get("depth", 2)), bool(arg.get("setsid", True)), out)
    _emit({"type": "log", "content": "tree " + " ".join(map(str, pids))})


def _start_node(depth: int, new_session: bool, out: int | None) -> list[int]:
    """Start one node of the chain; returns its pid and those of the nodes below it."""
    read_fd, write_fd = os.pipe()
    try:
        node = subprocess.Popen(
            [sys.executable, "-P", os.path.abspath(__file__), "--tree", str(depth), str(write_fd)],
            pass_fds=(write_fd,),
            start_new_session=new_session,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
        )
    finally:
        os.close(write_fd)
    _TREE.append(node)
    with os.fdopen(read_fd, "rb") as report:
        pids = [int(pid) for pid in report.read().split()]
    return pids or [node.pid]


def _tree_node(depth: int, report_fd: int) -> NoReturn:
    pids = [os.getpid()]
    if depth > 1:
        pids += _start_node(depth - 1, new_session=False, out=None)
    os.write(report_fd, " ".join(map(str, pids)).encode())
    os.close(report_fd)
    _sleep_forever()


def _sleep_forever() -> NoReturn:
    while True:
        time.sleep(3600)


def _signal(name: str) -> signal.Signals | None:
    upper = name.upper()
    try:
        return signal.Signals[upper if upper.startswith("SIG") else f"SIG{upper}"]
    except KeyError:
        return None


def _crash(name: str) -> None:
    sig = _signal(name)
    assert sig is not None
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file in the work directory
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    time.sleep(1)
    print(f"crash: {sig.name} did not end the process", file=sys.stderr, flush=True)
    raise SystemExit(3)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
