"""CodeBuddy Code (`codebuddy`): Claude Code's stream-json both ways, under its own name."""

from backends.codebuddy.backend import CodebuddyBackend

__all__ = ["CodebuddyBackend"]
