"""DevEco Code (`deveco`, HarmonyOS' coding agent on OpenCode's engine): `deveco run`'s NDJSON."""

from backends.deveco.backend import DevecoBackend

__all__ = ["DevecoBackend"]
