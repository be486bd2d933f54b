"""Qwen Code (npm `@qwen-code/qwen-code`): the backend (`qwen --output-format stream-json`)."""

from backends.qwen.backend import QwenBackend

__all__ = ["QwenBackend"]
