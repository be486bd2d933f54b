"""A minimal ACP agent for tests: `python fake_agent.py LOG MODE`.

It answers `initialize` and `session/new`, and on `session/prompt` prints a line that is no
JSON, asks permission for a tool call, streams one chunk and then waits. Every line it reads
is appended to LOG. MODE says what it does with `session/cancel`:

    polite     answers the prompt with `stopReason: cancelled` and exits
    stubborn   ignores it, and ignores SIGTERM too (only the kill ends it)
"""

from __future__ import annotations

import json
import signal
import sys
import time


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main() -> None:
    log_path, mode = sys.argv[1], sys.argv[2]
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    prompt_id = None
    for line in sys.stdin:
        with open(log_path, "a") as log:
            log.write(line)
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"protocolVersion": 1}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"sessionId": "s1"}})
        elif method == "session/prompt":
            prompt_id = message["id"]
            sys.stdout.write("not json at all\n")
            options = [{"optionId": "yes", "kind": "allow_once"}]
            tool_call = {"toolCallId": "t1", "title": "true", "status": "pending"}
            params = {"sessionId": "s1", "options": options, "toolCall": tool_call}
            send(
                {
                    "jsonrpc": "2.0",
                    "id": 99,
                    "method": "session/request_permission",
                    "params": params,
                }
            )
        elif message.get("id") == 99:  # our permission was answered: the tool ran, then a chunk
            done = {"sessionUpdate": "tool_call_update", "toolCallId": "t1", "status": "completed"}
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"update": done}})
            chunk = {"sessionUpdate": "agent_message_chunk", "content": {"text": "Thinking"}}
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"update": chunk}})
        elif method == "session/cancel" and mode == "polite":
            send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "cancelled"}})
            return
    while mode == "stubborn":  # stdin closed: still running until killed
        time.sleep(1)


if __name__ == "__main__":
    main()
