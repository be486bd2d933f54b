"""Cursor Agent (`cursor-agent`): the backend (`-p --output-format stream-json`), its events."""

from backends.cursor.backend import CursorBackend

__all__ = ["CursorBackend"]
