"""The brief as a marked block in a user's own `CLAUDE.md` / `AGENTS.md`, taken out again
byte for byte.

A user's repository often has its own brief file. Writing the daemon's over it would destroy
theirs, and leaving it behind would make their next manual `claude` run act on an old task's
issue. So, as Multica's daemon does: a missing file is made holding only the block; an
existing one gets a fixed separator (`\\n\\n`) and the block appended, the separator part of
what is taken out, so the file returns to its exact bytes whatever it ended with; a block
already there (a crashed run's) is replaced where it stands. Taking it out removes a file
that held only the block, else writes back what is around it. An end marker is looked for
only after the begin marker, and a begin marker with no end is a block to the end of the file.
"""

from __future__ import annotations

BEGIN = "<!-- BEGIN MULTICA-RUNTIME (auto-managed; do not edit) -->"
END = "<!-- END MULTICA-RUNTIME -->"
SEPARATOR = "\n\n"


def block(brief: str) -> str:
    """The brief between the markers."""
    return f"{BEGIN}\n{brief.rstrip(chr(10))}\n{END}\n"


def locate(content: str) -> tuple[int, int] | None:
    """Where the block is: [start, end), the end past its closing newline; None if absent."""
    start = content.find(BEGIN)
    if start < 0:
        return None
    after = start + len(BEGIN)
    end = content.find(END, after)
    if end < 0:
        return start, len(content)
    end += len(END)
    if content[end : end + 1] == "\n":
        end += 1
    return start, end


def injected(existing: str | None, brief: str) -> str:
    """The file's content with the brief in it (`existing` None: the file does not exist)."""
    if existing is None:
        return block(brief)
    found = locate(existing)
    if found is not None:
        start, end = found
        return existing[:start] + block(brief) + existing[end:]
    return existing + SEPARATOR + block(brief)


def excised(content: str) -> str | None:
    """The file's content with the block taken out; None when the file held only the block
    (it did not exist before), the content unchanged when it has no block."""
    found = locate(content)
    if found is None:
        return content
    start, end = found
    before, after = content[:start], content[end:]
    if before.endswith(SEPARATOR):
        return before[: -len(SEPARATOR)] + after
    if not before and not after:
        return None
    return before + after
