"""GitHub Copilot CLI (`@github/copilot` on npm): `copilot -p PROMPT --output-format json`."""

from backends.copilot.backend import CopilotBackend

__all__ = ["CopilotBackend"]
