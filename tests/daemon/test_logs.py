"""Log lines are greppable text or one JSON object each, and setup can run twice."""

from __future__ import annotations

import io
import json
import logging
import re
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from daemon.logs import NOISY_LOGGERS, configure_logging, short_id


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    """configure_logging changes process-wide state; put it back after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    noisy = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    for name, old in noisy.items():
        logging.getLogger(name).setLevel(old)


def test_text_line_shape() -> None:
    """A text line is `<UTC time with ms>Z LEVEL logger: message`."""
    out = io.StringIO()
    configure_logging("INFO", "text", stream=out)
    logging.getLogger("daemon.worker").info("claimed task %s backend=%s", "1a2b3c4d", "claude")
    line = out.getvalue().rstrip("\n")
    pattern = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO daemon\.worker: "
    assert re.fullmatch(pattern + r"claimed task 1a2b3c4d backend=claude", line), line


def test_json_line_parses_and_carries_extra_fields() -> None:
    """A JSON line has time, level, logger, message and every `extra` field."""
    out = io.StringIO()
    configure_logging("INFO", "json", stream=out)
    logging.getLogger("daemon.task.runner").warning(
        "task %s failed", "1a2b3c4d", extra={"task_id": "1a2b3c4d-full", "backend": "codex"}
    )
    doc = json.loads(out.getvalue())
    assert doc["level"] == "WARNING"
    assert doc["logger"] == "daemon.task.runner"
    assert doc["message"] == "task 1a2b3c4d failed"
    assert doc["task_id"] == "1a2b3c4d-full"
    assert doc["backend"] == "codex"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", doc["time"])


def test_json_line_keeps_exception_and_unencodable_extras_on_one_line() -> None:
    """A traceback and a non-JSON extra value still give exactly one parseable line."""
    out = io.StringIO()
    configure_logging("INFO", "json", stream=out)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("daemon.x").exception("it broke", extra={"path": Path("/srv/w")})
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    doc = json.loads(lines[0])
    assert "RuntimeError: boom" in doc["exception"]
    assert doc["path"] == "/srv/w"


def test_configuring_twice_does_not_duplicate_lines() -> None:
    """A second configure_logging replaces the first handler instead of adding one."""
    first, second = io.StringIO(), io.StringIO()
    configure_logging("INFO", "text", stream=first)
    configure_logging("INFO", "json", stream=second)
    logging.getLogger("daemon.worker").info("once")
    assert first.getvalue() == ""
    assert len(second.getvalue().splitlines()) == 1


def test_level_filters_lower_records() -> None:
    """At WARNING, INFO lines are not written."""
    out = io.StringIO()
    configure_logging("warning", "text", stream=out)
    logging.getLogger("daemon.worker").info("hidden")
    logging.getLogger("daemon.worker").warning("shown")
    assert "hidden" not in out.getvalue()
    assert "shown" in out.getvalue()


def test_noisy_library_loggers_are_quieted() -> None:
    """httpx and uvicorn.access INFO request lines are dropped even at DEBUG."""
    out = io.StringIO()
    configure_logging("DEBUG", "text", stream=out)
    logging.getLogger("httpx").info('HTTP Request: POST /claim "HTTP/1.1 200 OK"')
    logging.getLogger("uvicorn.access").info("GET /healthz 200")
    logging.getLogger("httpx").warning("kept")
    assert out.getvalue().count("\n") == 1
    assert "kept" in out.getvalue()


@pytest.mark.parametrize(
    ("level", "fmt", "named"), [("LOUD", "text", "'LOUD'"), ("INFO", "xml", "'xml'")]
)
def test_bad_level_or_format_is_a_clear_error(level: str, fmt: str, named: str) -> None:
    """An unknown level or format raises ValueError naming it."""
    with pytest.raises(ValueError, match=named):
        configure_logging(level, fmt, stream=io.StringIO())


def test_short_id_is_the_random_tail() -> None:
    """short_id keeps the last 12 hex digits of a UUID (Go's task key) and leaves shorter ids
    whole."""
    assert short_id("1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809") == "b4c5d6e7f809"
    assert short_id("t-1") == "t1"


def test_tasks_of_one_minute_have_different_short_ids() -> None:
    """Six UUIDv7 ids made within a minute share their first 8 hex digits (the clock's high
    bits), never their short ids."""
    start_ms = 0x01A2194D << 16
    ids = [_uuid7(start_ms + n * 10_000) for n in range(6)]
    assert len({i[:8] for i in ids}) == 1
    assert len({short_id(i) for i in ids}) == 6


def _uuid7(ms: int) -> str:
    value = (ms << 80) | (0x7 << 76) | (0b10 << 62) | secrets.randbits(62)
    return str(uuid.UUID(int=value))


def test_a_servers_newline_cannot_forge_a_text_line() -> None:
    """Control characters in a logged value (a server's action id) are escapes in the text
    line: a `\\n` cannot start a line that reads like the daemon's own, nor ESC recolour one."""
    out = io.StringIO()
    configure_logging("INFO", "text", stream=out)
    forged = "u1\n2026-11-26T00:00:00.000Z INFO daemon.worker: task 1a2b3c4d completed\x1b[2K"
    logging.getLogger("daemon.protocol").info("pending update %s answered", forged)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].endswith(
        "pending update u1\\n2026-11-26T00:00:00.000Z INFO daemon.worker: task 1a2b3c4d"
        " completed\\x1b[2K answered"
    )
