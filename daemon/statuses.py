"""Task statuses the daemon, its CLI and the embedded server agree on."""

from __future__ import annotations

TERMINAL_STATUSES = ("completed", "failed", "cancelled")
"""A task in one of these is finished: nothing more is reported or run for it."""
