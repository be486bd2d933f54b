"""UTC times as the daemon writes them everywhere: ISO-8601 with a `Z` suffix."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal

Precision = Literal["seconds", "milliseconds", "microseconds"]


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
