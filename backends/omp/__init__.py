"""Oh-My-Pi (`omp`, npm `@oh-my-pi/pi-coding-agent`): Pi's fork, driven through Pi's protocol."""

from backends.omp.backend import OmpBackend

__all__ = ["OmpBackend"]
