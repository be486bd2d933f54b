"""Codex: the backend (`codex exec --json` or `codex app-server`) and its events."""

from backends.codex.backend import CodexBackend

__all__ = ["CodexBackend"]
