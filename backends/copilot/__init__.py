"""GitHub Copilot CLI (`@github/copilot` on npm): the prompt on stdin, JSON events out."""

from backends.copilot.backend import CopilotBackend

__all__ = ["CopilotBackend"]
