"""Agent output as lines: framing a byte stream with a cap, and cleaning untrusted bytes."""

from __future__ import annotations

MAX_LINE_BYTES = 32 * 1024 * 1024


class LineFramer:
    """Splits a byte stream into lines, cutting any line at `cap` bytes with bounded memory."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._buf = bytearray()
        self._discarding = False
        self.cut_lines = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        """Return the lines completed by `chunk` (without their newline)."""
        lines: list[bytes] = []
        start = 0
        while (newline := chunk.find(b"\n", start)) >= 0:
            if self._discarding:
                self._discarding = False
            else:
                self._buf += chunk[start:newline]
                lines.append(self._take())
            start = newline + 1
        if not self._discarding:
            self._buf += chunk[start:]
            if len(self._buf) > self._cap:
                # Deliver the cut line now and drop the rest of it up to its newline.
                lines.append(self._take())
                self._discarding = True
        return lines

    def flush(self) -> bytes | None:
        """The unterminated last line at end of stream, if any."""
        if self._discarding or not self._buf:
            return None
        return self._take()

    def _take(self) -> bytes:
        if len(self._buf) > self._cap:
            self.cut_lines += 1
            line = bytes(self._buf[: self._cap])
        else:
            line = bytes(self._buf)
        self._buf.clear()
        return line


def clean_line(raw: bytes) -> str:
    """Agent output is untrusted: drop NUL bytes and replace invalid UTF-8."""
    text = raw.replace(b"\0", b"").decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\r") else text


class Tail:
    """The last `cap` bytes of a stream (an agent's stderr), readable as cleaned text."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._buf = bytearray()

    def add(self, chunk: bytes) -> None:
        """Append `chunk`, dropping the oldest bytes beyond the cap."""
        self._buf += chunk
        if len(self._buf) > self._cap:
            del self._buf[: len(self._buf) - self._cap]

    def text(self) -> str:
        """The tail, cleaned like an output line and stripped."""
        return clean_line(bytes(self._buf)).strip()
