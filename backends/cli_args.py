"""Configured and task arguments for a CLI that reads the prompt the daemon gives it.

Pi and Qwen Code take the prompt on stdin and would add a positional word (or Pi an `@file`)
to it, and each has flags the daemon sets itself (the output format, the session). Such
arguments are dropped, each with a warning; every other flag keeps its value. A flag takes
the word after it as its value unless it is written `--flag=value`, is one the CLI knows to
take none, or the next word is a flag itself.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ArgRules:
    """One CLI's flags, as far as filtering its arguments needs them."""

    cli: str
    reserved: Collection[str]
    """Flags the daemon sets (dropped with their value, if they take one)."""
    alone: Collection[str]
    """Flags that take no value (reserved ones included)."""


def filter_args(args: Sequence[str], rules: ArgRules) -> list[str]:
    """`args` without the daemon's own flags and positional or `@file` words."""
    kept: list[str] = []
    i = 0
    while i < len(args):
        word = args[i]
        i += 1
        flag = word.split("=", 1)[0]
        value: list[str] = []
        takes_value = word.startswith("-") and "=" not in word and flag not in rules.alone
        if takes_value and i < len(args) and not args[i].startswith(("-", "@")):
            value = [args[i]]
            i += 1
        if not word.startswith("-"):
            log.warning(
                "%s: ignoring %r in the arguments (it would change the prompt)", rules.cli, word
            )
        elif flag in rules.reserved:
            log.warning("%s: ignoring %s in the arguments (the daemon sets it)", rules.cli, flag)
        else:
            kept += [word, *value]
    return kept
