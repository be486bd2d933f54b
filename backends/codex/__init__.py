"""Codex: the backend (`codex exec --json`) and its events."""

from backends.codex.backend import CodexBackend

__all__ = ["CodexBackend"]
