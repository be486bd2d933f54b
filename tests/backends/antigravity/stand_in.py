"""A stand-in `agy`: records its arguments, writes the glog lines of LOG_FIXTURE (with its
app data directory filled in) to its `--log-file`, and prints STDOUT's lines."""

import json
import os
import sys

args = sys.argv[1:]
with open(os.environ["RECORD"], "w") as record:
    json.dump(args, record)
log = args[args.index("--log-file") + 1]
with open(os.environ["LOG_FIXTURE"]) as fixture, open(log, "w") as out:
    out.write(fixture.read().replace("{appdata}", os.environ.get("APPDATA", "")))
for line in os.environ.get("STDOUT", "").split("|"):
    if line:
        print(line, flush=True)
