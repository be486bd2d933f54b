"""What the daemon reads of `agy`'s own log (`--log-file`) and transcript after a run.

agy prints only text on stdout; what else the daemon needs is in the glog lines of the log
file it is told to write:

    Print mode: conversation=<uuid>, sending message     the session (the last one named)
    Print mode: timed out after N polls                  its own print timeout was reached
                                                         (it exits 0 regardless)
    agent executor error: <words>                        the provider's error (the last one)
    CLI app data directory: <dir>                        where its transcripts are

agy 1.0.14 can finish a turn and print nothing: the answer is then read from the
conversation's `transcript.jsonl` under that directory (the planner's settled responses
after the last user input).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_CONVERSATION = re.compile(r"conversation=([0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12})")
_PRINT_TIMEOUT = re.compile(r"Print mode: timed out after \d+ polls")
_PROVIDER_ERROR = re.compile(r"agent executor error:\s*(.+)")
_APP_DATA = re.compile(r"CLI app data directory:\s*(.+)")


@dataclass(frozen=True, slots=True)
class AgyLog:
    """What one run's log says."""

    conversation: str = ""
    timed_out: bool = False
    provider_error: str = ""
    app_data: str = ""


def read_log(text: str) -> AgyLog:
    """The facts in a log's text (the last conversation and error named, the first data dir)."""
    conversations = _CONVERSATION.findall(text)
    errors = _PROVIDER_ERROR.findall(text)
    data = _APP_DATA.search(text)
    return AgyLog(
        conversation=conversations[-1] if conversations else "",
        timed_out=_PRINT_TIMEOUT.search(text) is not None,
        provider_error=errors[-1].strip() if errors else "",
        app_data=data.group(1).strip() if data else "",
    )


def transcript_answer(text: str) -> str:
    """The model's settled responses after the last user input in a `transcript.jsonl`."""
    parts: list[str] = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if record.get("type") == "USER_INPUT":
            parts = []
            continue
        planner = record.get("type") == "PLANNER_RESPONSE" and record.get("source") == "MODEL"
        content = record.get("content")
        settled = planner and record.get("status") == "DONE"
        if settled and isinstance(content, str) and content.strip():
            parts.append(content)
    return "\n\n".join(parts)
