"""Text from users put into the brief safely: the agent reads the brief as trusted
instructions, so a name or a status a user typed must not open a heading or end a bold span."""

from __future__ import annotations

import re

_CODE_TOKEN = re.compile(r"[A-Za-z0-9_.-]+")
_SPECIAL = frozenset("*_`\\[]<")
_BREAKS = frozenset("\r\n\t\v\f")


def inline(text: str) -> str:
    """One line of plain text: breaks become one space, control bytes go, Markdown's inline
    marks are escaped."""
    out: list[str] = []
    for char in text:
        if char in _BREAKS:
            if out and out[-1] != " ":
                out.append(" ")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            continue
        elif char in _SPECIAL:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out).strip()


def code_token(text: str) -> str:
    """`text` when it is safe inside backticks (letters, digits, `_ . -`), else ""."""
    text = text.strip()
    return text if _CODE_TOKEN.fullmatch(text) else ""
