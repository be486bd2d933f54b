"""Time as the daemon writes and reads it: UTC times with a `Z` suffix, and Go-style durations
(`300ms`, `1.5h`, `2h45m`, bare `0`, plus a `d` day suffix)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Literal

Precision = Literal["seconds", "milliseconds", "microseconds"]

SYNTAX = "a Go duration such as 300ms, 45s, 1.5h, 2h45m, 1d, or 0"

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h|d)")


def parse_duration(text: str) -> float:
    """Return the duration in seconds; raise ValueError for anything Go would reject."""
    s = text.strip()
    if s in ("0", "+0"):
        return 0.0
    if s.startswith("+"):
        s = s[1:]
    if not s or s.startswith("-"):
        raise ValueError(f"invalid duration {text!r}")
    total = 0.0
    pos = 0
    for match in _PART.finditer(s):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(s):
        raise ValueError(f"invalid duration {text!r}")
    return total


def format_duration(seconds: float) -> str:
    """Render seconds the way Go prints a duration, for logs and error texts (`1m30s`)."""
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    whole = int(seconds)
    frac = seconds - whole
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    out = ""
    if hours:
        out += f"{hours}h"
    if hours or minutes:
        out += f"{minutes}m"
    out += f"{secs + frac:g}s"
    return out


def utc_iso(wall: float | None = None, precision: Precision = "seconds") -> str:
    """Wall time `wall` (default: now) as `2026-01-02T03:04:05Z`, or with a fraction."""
    moment = datetime.fromtimestamp(time.time() if wall is None else wall, UTC)
    return moment.isoformat(timespec=precision).replace("+00:00", "Z")


def parse_utc(value: object) -> datetime | None:
    """An RFC 3339 time from a server or a file; None for junk and Go's zero time (year 1)."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return None if moment.year <= 1 else moment
