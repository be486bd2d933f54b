"""Log setup: one handler on the root logger, greppable text lines or one JSON object a line.

Text lines read `2026-11-25T21:52:33.123Z INFO daemon.worker.runs: task 1a2b3c4d: claimed
backend=claude`: the message carries what a human greps for. JSON lines carry the same
`time`, `level`, `logger` and `message` plus every `extra={...}` field (task_id, backend,
...), so log pipelines can filter on them without parsing the message.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

from daemon.times import utc_iso

FORMATS = ("text", "json")

# Libraries that log every request at INFO; their lines would drown the daemon's own.
NOISY_LOGGERS = ("httpx", "httpcore", "uvicorn.access")

# Control characters as escapes in a text line: a server's string (an action id, an error text)
# holding a newline would otherwise write a line of its own that reads like the daemon's.
_ESCAPES = {
    code: ascii(chr(code))[1:-1] for code in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)
}

# Attributes every LogRecord has; anything else on a record came from `extra=`.
_RECORD_ATTRS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


SHORT_ID_LEN = 12


def short_id(task_id: str) -> str:
    """The last 12 characters of an id, dashes dropped: short enough to read, unique enough to
    grep. Multica's ids are UUIDv7, whose first 8 hex digits are a clock that changes once a
    minute or so: six tasks of one minute all logged as `01a2194d`. The tail is random, and it
    is also the name Multica's daemon gives the task's directory and branch."""
    plain = task_id.replace("-", "")
    return plain[-SHORT_ID_LEN:] if len(plain) > SHORT_ID_LEN else plain


def configure_logging(level: str = "INFO", fmt: str = "text", stream: TextIO | None = None) -> None:
    """Send all logs to `stream` (default: sys.stderr at call time); safe to call again."""
    levels = logging.getLevelNamesMapping()
    if level.upper() not in levels:
        raise ValueError(f"unknown log level {level!r}")
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r}: expected text or json")
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _DaemonHandler)]:
        root.removeHandler(old)
    handler = _DaemonHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(handler)
    root.setLevel(levels[level.upper()])
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def escape_controls(text: str) -> str:
    """`text` with every control character written as its escape (`\\n`, `\\x1b`, ...)."""
    return text if text.isprintable() else text.translate(_ESCAPES)


class _DaemonHandler(logging.StreamHandler[TextIO]):
    """The handler `configure_logging` installs; its type marks it for replacement."""


def _timestamp(record: logging.LogRecord) -> str:
    return utc_iso(record.created, precision="milliseconds")


class TextFormatter(logging.Formatter):
    """`<UTC time> <LEVEL> <logger>: <message>`, then the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        message = escape_controls(record.getMessage())
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {message}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": _timestamp(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRS and key not in doc:
                doc[key] = value
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        # default=str: an extra that JSON cannot encode (a Path, an enum) must not lose the line.
        return json.dumps(doc, default=str, ensure_ascii=False)
