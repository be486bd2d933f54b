"""The one way JSON from outside the daemon is read: server answers, control frames, error
bodies and the files in `~/.multica` or a work directory that another process could have
written.

Python's own decoder recurses once per level, so `[[[[...]]]]` a hundred thousand deep raises
`RecursionError`, which no `except ValueError` catches and which ends whatever task group it
reaches. Here the text is parsed by pydantic-core's parser, which refuses deep nesting itself,
then held to `MAX_DEPTH` levels and `limit` bytes; every failure is one `MalformedInputError`
(a `ValueError`), never anything else.
"""

from __future__ import annotations

from typing import Any

from pydantic_core import from_json

from daemon.errors import MalformedInputError

MAX_DEPTH = 64
"""Levels of nesting accepted: no protocol body or config file comes near it."""
DEFAULT_LIMIT = 32 * 1024 * 1024
"""Bytes of one JSON text read by default (a claim answer with its skills is the largest)."""


def loads(data: bytes | bytearray | str, *, limit: int = DEFAULT_LIMIT, what: str = "input") -> Any:
    """The value of the JSON text `data`; `MalformedInputError` naming `what` when it is not
    JSON, longer than `limit` bytes or nested deeper than `MAX_DEPTH`."""
    size = len(data) if not isinstance(data, str) else len(data.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise MalformedInputError(f"{what} is larger than {limit} bytes")
    try:
        value = from_json(data, allow_inf_nan=False)
    except (ValueError, RecursionError, MemoryError) as exc:
        # The parser's message quotes no input, only where it stopped.
        reason = "nested too deep" if "recursion" in str(exc) else "not JSON"
        raise MalformedInputError(f"{what} is {reason}") from None
    if _too_deep(value):
        raise MalformedInputError(f"{what} is nested deeper than {MAX_DEPTH} levels")
    return value


def _too_deep(value: Any) -> bool:
    """Whether `value` nests containers deeper than `MAX_DEPTH` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, dict | list) else []
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > MAX_DEPTH:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False
