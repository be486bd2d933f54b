"""The scripted test agent: the backend, its `Script` builder, and the child that replays it."""

from backends.scripted.backend import Script, ScriptedBackend

__all__ = ["Script", "ScriptedBackend"]
