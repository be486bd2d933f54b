"""OpenClaw (`openclaw agent --local --json`): one JSON answer per run, or its line events."""

from backends.openclaw.backend import OpenclawBackend

__all__ = ["OpenclawBackend"]
