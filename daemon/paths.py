"""Ids from the server as path components: safe, short, and never two ids in one file."""

from __future__ import annotations

import hashlib
import re

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def path_part(value: str) -> str:
    """`value` as one safe path component: itself when plain (a UUID), else a hashed name.

    Plain means letters, digits, `-` and `_`, at most 64 characters; anything else keeps a
    readable prefix and gains `.<sha256 prefix>`. No plain value contains a dot, so the two
    kinds never meet, and `a.b`, `a_b`, `../x` and a 300-character id all stay distinct and short.
    """
    if _PLAIN.fullmatch(value):
        return value
    readable = _UNSAFE.sub("_", value)[:40].strip("_-") or "_"
    return f"{readable}.{hashlib.sha256(value.encode()).hexdigest()[:16]}"
