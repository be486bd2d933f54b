"""Claude Code: the backend (`claude -p`), its stream-json output, its content blocks."""

from backends.claude.backend import ClaudeBackend

__all__ = ["ClaudeBackend"]
