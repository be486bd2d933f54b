"""Pi (npm `@mariozechner/pi-coding-agent`): the backend (`pi -p --mode json`), its events."""

from backends.pi.backend import PiBackend

__all__ = ["PiBackend"]
