"""How large each field of a request may be, so every request fits well under a server's limit.

A server takes at most so much per request (the embedded one 16 MiB, `MAX_BODY`); an agent's
output has no such bound. Every field the daemon forwards is cut to its cap here, with a marker
saying how much was cut, and a tool input is also cut in depth (a parser refuses JSON nested a
few hundred levels deep). Transcript batches are sized by `BATCH_BYTES` on top of these caps.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

CONTENT_CAP = 1024 * 1024
"""UTF-8 bytes of one transcript message's text (text, thinking, error)."""
NAME_CAP = 1024
"""UTF-8 bytes of a tool's name or a session id (never this long from a sane agent)."""
TOOL_OUTPUT_CAP = 8 * 1024
"""UTF-8 bytes of one tool result's output (the transcript shows its start)."""
INPUT_CAP = 256 * 1024
"""Bytes of one tool input serialised as JSON."""
INPUT_DEPTH = 32
"""Levels of nesting kept in a tool input; deeper values become a marker."""
RESULT_CAP = 4 * 1024 * 1024
"""UTF-8 bytes of a task's result (`complete`'s output)."""
SHORT_RESULT = 64 * 1024
"""The result once more, cut this short, when a server refuses the capped one."""
ERROR_CAP = 64 * 1024
"""UTF-8 bytes of a task's error (`fail`'s error)."""
SHORT_ERROR = 4 * 1024
"""The error once more, cut this short, when a server refuses the capped one."""
BATCH_BYTES = 4 * 1024 * 1024
"""Estimated bytes of one transcript request: a quarter of the embedded server's limit, since
JSON escaping can make a message's text several times longer on the wire."""

_MARKER_ROOM = 48  # "\n… [<up to 20 digits> more bytes not sent]" in UTF-8
_TOO_DEEP = f"… [nested deeper than {INPUT_DEPTH} levels, not sent]"


def clean(text: str) -> str:
    """Drop NUL bytes and lone surrogates, which JSON decoding can let through."""
    if "\x00" in text:
        text = text.replace("\x00", "")
    if text.isascii():  # the common case, and it cannot hold a surrogate
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def cap(text: str, limit: int) -> str:
    """Keep the first `limit` UTF-8 bytes of `text`, then say how many more were cut."""
    if len(text) * 4 <= limit:  # no UTF-8 character is longer than 4 bytes
        return text
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", "ignore")
    return f"{kept}\n… [{len(data) - limit} more bytes not sent]"


def fit(text: str, limit: int) -> str:
    """`text` in at most `limit` UTF-8 bytes, the marker included (so fitting twice is a no-op)."""
    if len(text) * 4 <= limit or len(text.encode("utf-8")) <= limit:
        return text
    return cap(text, limit - _MARKER_ROOM)


def bounded_input(value: Mapping[str, Any]) -> tuple[dict[str, Any], int]:
    """A tool input the server can take, and its size as JSON: nesting past `INPUT_DEPTH` and
    strings past `INPUT_CAP` replaced by markers, and the whole, if still over `INPUT_CAP`, by
    the start of its JSON text under the key `truncated`."""
    try:
        data = to_json(value)
    except PydanticSerializationError:  # e.g. a lone surrogate: cleaned below
        data = b""
    # The usual input (a few flat fields) as it is: the number of brackets bounds its depth,
    # and it holds no NUL, which a PostgreSQL jsonb column refuses.
    brackets = data.count(b"{") + data.count(b"[")
    if data and len(data) <= INPUT_CAP and brackets <= INPUT_DEPTH and b"\\u0000" not in data:
        return dict(value), len(data)
    shaped = {clean(str(k)): _bounded(v, INPUT_DEPTH - 1) for k, v in value.items()}
    try:
        data = to_json(shaped)
    except PydanticSerializationError:  # a value JSON has no form for (never from a parser)
        shaped = {"truncated": "… [not serialisable, not sent]"}
        return shaped, input_size(shaped)
    if len(data) > INPUT_CAP:
        shaped = {"truncated": fit(data.decode("utf-8", "replace"), INPUT_CAP // 2)}
        return shaped, input_size(shaped)
    return shaped, len(data)


def input_size(value: Mapping[str, Any]) -> int:
    """Bytes of a (bounded) tool input as JSON."""
    return len(to_json(value))


def _bounded(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return cap(clean(value), INPUT_CAP)
    if isinstance(value, Mapping):
        if depth <= 0:
            return _TOO_DEEP
        return {clean(str(k)): _bounded(v, depth - 1) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if depth <= 0:
            return _TOO_DEEP
        return [_bounded(v, depth - 1) for v in value]
    return value
