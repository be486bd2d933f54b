"""DeepSeek Harness (`dsh`) with Multica's runtime profile: its versioned JSONL over stdio."""

from backends.dsh.backend import DshBackend

__all__ = ["DshBackend"]
