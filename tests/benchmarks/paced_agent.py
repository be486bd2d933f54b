"""A Claude Code stand-in for the load benchmark: stream-json text lines at a steady rate, each
naming when it was printed, until a stop file appears.

Installed as the `claude` executable of every daemon measured (`MULTICA_CLAUDE_PATH`), so each
runs it the way it runs Claude Code: `claude -p --output-format stream-json --input-format
stream-json ...`, the prompt as the first stream-json line on stdin. `--version` answers as
Claude Code does. The prompt holds `pace RATE STOPFILE`. Line i is printed at start + i / RATE
(an absolute schedule, so it never drifts) as an assistant message whose text is `i TIME;`,
TIME being the wall clock as it was printed: a daemon that stores each text as its own row and
one that joins the texts of a beat into one row (Multica's) both keep every stamp readable.
Once STOPFILE exists it prints its result and exits. Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid

VERSION = "2.1.200 (Claude Code)"


def main() -> int:
    if "--version" in sys.argv[1:]:
        print(VERSION)
        return 0
    session = str(uuid.uuid4())
    out = sys.stdout

    def emit(event: dict[str, object]) -> None:
        out.write(json.dumps({**event, "session_id": session}) + "\n")
        out.flush()

    # The prompt is the first line; stdin stays open (stream-json input) until the result.
    found = re.search(r"pace ([\d.]+) (\S+?)(?:\\n|\"|\s|$)", sys.stdin.readline())
    emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "model": "paced"})
    if found is None:
        emit({"type": "result", "subtype": "error", "is_error": True, "result": "no pace"})
        return 1
    rate, stop = float(found.group(1)), found.group(2)
    start = time.monotonic()
    sent = 0
    while not os.path.exists(stop):
        sent += 1
        pause = start + sent / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        text = f"{sent} {time.time():.6f};"
        message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
        emit({"type": "assistant", "message": message})
    usage = {"input_tokens": 1, "output_tokens": sent}
    emit({"type": "result", "subtype": "success", "result": f"sent {sent}", "usage": usage})
    return 0


if __name__ == "__main__":
    sys.exit(main())
