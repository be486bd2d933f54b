"""A stand-in `dsh` with Multica's runtime profile, speaking protocol version 1 over stdio:
`--version`, `--probe` (unless PROBE=none), `--list-models` (prints the lines of the file
MODELS names, then exits with LIST_EXIT, 0 by default), and `--stdio`, which reads the
execute command, records it, answers with frames and exits when stdin closes."""

import json
import os
import sys

args = sys.argv[1:]
if args == ["--version"]:
    print("dsh 0.1.5-rc.2")
    sys.exit(0)
if "--probe" in args:
    if os.environ.get("PROBE") != "none":
        print(json.dumps({"v": 1, "type": "probe", "runtime": "dsh", "protocol_version": 1}))
    sys.exit(0)
if args == ["--profile", "multica", "--list-models"]:
    with open(os.environ["MODELS"]) as listing:
        sys.stdout.write(listing.read())
    sys.exit(int(os.environ.get("LIST_EXIT", "0")))
assert args[:3] == ["--profile", "multica", "--stdio"], args
command = json.loads(sys.stdin.readline())
with open(os.environ["RECORD"], "a") as record:
    record.write(json.dumps({"argv": args, "command": command}) + "\n")
rid = command["request_id"]


def say(**frame):
    print(json.dumps({"v": 1, "request_id": rid, **frame}), flush=True)


print(json.dumps({"v": 1, "type": "ready", "runtime": "dsh", "protocol_version": 1}), flush=True)
if command.get("resume_session_id") == "gone":
    say(
        type="result",
        status="failed",
        resume_rejected=True,
        error={"code": "session_not_found", "message": "no such session"},
    )
else:
    say(type="session", session_id="new-1")
    say(type="text", content="hi")
    say(type="result", status="completed", output="hi", session_id="new-1")
sys.stdin.read()  # exits only once the daemon closes stdin
