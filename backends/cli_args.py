"""Configured and task arguments for a CLI, without what the daemon gives it itself.

`drop_reserved` drops the flags the daemon sets (Claude Code, Copilot), with their values.

`filter_args` is for a CLI that reads the prompt the daemon gives it: Pi and Qwen Code take
the prompt on stdin and would add a positional word (or Pi an `@file`) to it, and each has
flags the daemon sets itself (the output format, the session). Such arguments are dropped,
each with a warning; every other flag keeps its value. A flag takes the word after it as its
value unless it is written `--flag=value`, is one the CLI knows to take none, or the next
word is a flag itself.
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


def drop_reserved(
    args: Sequence[str], cli: str, with_value: Collection[str], alone: Collection[str] = ()
) -> list[str]:
    """`args` without the daemon's own flags, each with a warning: one of `with_value` with its
    value (the next word, unless written `--flag=value`), one of `alone` by itself."""
    kept: list[str] = []
    skip_value = False
    for arg in args:
        if skip_value:
            skip_value = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in with_value or flag in alone:
            log.warning("%s: ignoring argument %r: the daemon sets it", cli, arg)
            skip_value = flag in with_value and "=" not in arg
            continue
        kept.append(arg)
    return kept
