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
