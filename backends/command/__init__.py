"""Any executable speaking the line protocol: the backend and the protocol itself."""

from backends.command.backend import CommandBackend

__all__ = ["CommandBackend"]
