"""A tool's input schema as Multica pins it: written back as Go's `json.Marshal` writes a
decoded JSON value (keys sorted, compact, every number a float64 in Go's notation, `<`, `>`,
`&`, U+2028 and U+2029 escaped) and hashed `sha256:<hex>`. An administrator's approval stores
that digest; the broker compares each tool's schema with it, at the start and on every list.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any


def canonical(value: Any) -> str:
    """`value` (decoded JSON) as Go's `json.Marshal` writes it back: keys sorted, compact,
    every number a float64 in Go's notation, `<`, `>`, `&`, U+2028 and U+2029 escaped."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _go_number(float(value))
    if isinstance(value, str):
        return '"' + "".join(_go_char(c) for c in value) + '"'
    if isinstance(value, list):
        return "[" + ",".join(canonical(v) for v in value) + "]"
    if isinstance(value, dict):
        pairs = (f"{canonical(str(k))}:{canonical(value[k])}" for k in sorted(value))
        return "{" + ",".join(pairs) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def digest(value: Any) -> str:
    """The pinned form of a schema: `sha256:` and the hex digest of its canonical text."""
    return "sha256:" + hashlib.sha256(canonical(value).encode()).hexdigest()


def _go_number(number: float) -> str:
    # Go writes the shortest digits that read back the same float: fixed notation, or an
    # exponent below 1e-6 and from 1e21 on, with `e-07` written `e-7`.
    if number == 0:
        return "-0" if str(number).startswith("-") else "0"
    if abs(number) < 1e-6 or abs(number) >= 1e21:
        mantissa, _, exponent = f"{number!r}".partition("e")
        sign, digits = exponent[0], exponent[1:].lstrip("0") or "0"
        if sign == "-" and len(digits) == 1:
            return f"{mantissa}e-{digits}"
        return f"{mantissa}e{sign}{digits.zfill(2)}"
    text = format(Decimal(repr(number)), "f")
    return text[:-2] if text.endswith(".0") else text


_ESCAPED = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",  # Go 1.22 on; earlier ones wrote \u0008 and \u000c
    "\f": "\\f",
}


def _go_char(char: str) -> str:
    if char in _ESCAPED:
        return _ESCAPED[char]
    if char < " " or char in "<>&\u2028\u2029":
        return f"\\u{ord(char):04x}"
    return char
