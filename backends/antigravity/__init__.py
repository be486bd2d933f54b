"""Antigravity CLI (`agy -p`): plain text on stdout, its session and failures in its log."""

from backends.antigravity.backend import AntigravityBackend

__all__ = ["AntigravityBackend"]
