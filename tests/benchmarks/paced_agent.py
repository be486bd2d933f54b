"""A `command` agent for the load benchmark: text messages at a steady rate, each naming when
it was printed, until a stop file appears.

The prompt (on stdin) holds `pace RATE STOPFILE`. Message i is printed at start + i / RATE
(an absolute schedule, so it never drifts) as `{"type": "text", "content": "i TIME"}`, TIME
being the wall clock as it was printed. Once STOPFILE exists it prints its result and exits.
Standard library only.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time


def main() -> int:
    found = re.search(r"pace (\S+) (\S+)", sys.stdin.read())
    if found is None:
        print(json.dumps({"type": "result", "output": "no pace in the prompt", "error": "x"}))
        return 1
    rate, stop = float(found.group(1)), found.group(2)
    start = time.monotonic()
    sent = 0
    out = sys.stdout
    while not os.path.exists(stop):
        sent += 1
        pause = start + sent / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        out.write(json.dumps({"type": "text", "content": f"{sent} {time.time():.6f}"}) + "\n")
        out.flush()
    out.write(json.dumps({"type": "result", "output": f"sent {sent}"}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
