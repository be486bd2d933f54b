"""The `config.toml` of a task's Codex home: the user's, with what Multica's daemon changes.

- Codex hands its shell tools an environment without any variable whose name holds `KEY`,
  `SECRET` or `TOKEN` (`shell_environment_policy.ignore_default_excludes`, which a user's own
  config may set), so `multica issue ...` run from Codex's shell would have no MULTICA_TOKEN.
  The task's config therefore owns the policy: every variable of the agent's environment
  passes by its exact name, except credentials the daemon's own environment held (Codex's
  filter, kept for them) and the daemon's own MULTICA_* ones; what the task set passes, and
  a credential-looking name only when the agent's `custom_env` set it. Every policy of the
  user's (root or per profile) is dropped for this one.
- Codex's auto-memory (`features.memories`, `memories.generate_memories`,
  `memories.use_memories`) is off: an opaque store that leaks between tasks and workspaces.
- Codex's native sub-agents (`features.multi_agent`) are off: the daemon follows only the
  parent thread, whose end would cut children short.
- `[[skills.config]]` entries are dropped: Codex Desktop writes entries the CLI refuses to
  parse, and the task's skills are in the home's `skills/` anyway.

The text is edited, not re-serialised, so the user's comments and layout stay; the user's
file must parse first (a config Codex itself would refuse is left as it is, for Codex to say
so), and the result must parse too.
"""

from __future__ import annotations

import json
import logging
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from daemon.errors import AgentSetupError

log = logging.getLogger(__name__)

SHELL_POLICY = "shell_environment_policy"
_OFF = (("features", "multi_agent"), ("features", "memories"))
_MEMORIES_OFF = (("memories", "generate_memories"), ("memories", "use_memories"))
_CREDENTIAL = ("KEY", "SECRET", "TOKEN")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_MARK = "# Set by agent-daemon for this task (rewritten at every start):\n"


@dataclass(frozen=True, slots=True)
class _Expr:
    """One top-level piece of a TOML document: a header, a key/value, or anything between."""

    kind: str  # "table", "array", "pair" or "other"
    keys: tuple[str, ...]
    start: int
    end: int


def shell_names(
    env: Mapping[str, str], inherited: Mapping[str, str], custom_env: Mapping[str, str]
) -> list[str]:
    """The exact names Codex's shell tools get: `env` is the agent's, `inherited` the
    daemon's own environment it came from, `custom_env` the agent's own (its names alone may
    carry a credential the task set)."""
    authorized = {k.upper() for k in custom_env}
    chosen: dict[str, str] = {}
    for name, value in env.items():
        upper = name.upper()
        explicit = upper in authorized or inherited.get(name) != value
        if upper.startswith("MULTICA_") or any(word in upper for word in _CREDENTIAL):
            # The daemon's own MULTICA_* are not the task's; an inherited credential keeps
            # Codex's filter (a task-set MULTICA_* is the task's own).
            allowed = explicit and (upper.startswith("MULTICA_") or upper in authorized)
            if not allowed:
                continue
        chosen[upper] = name  # Codex matches names without case: one entry each
    return [chosen[k] for k in sorted(chosen)]


def task_config(text: str, names: Iterable[str], disabled: Iterable[str] = ()) -> str:
    """The task's config from the user's `text`: the policy letting `names` through, memory
    and sub-agents off, `[[skills.config]]` gone but for one `enabled = false` entry per
    `SKILL.md` in `disabled` (the runtime's skills the agent turned off). A `text` that does
    not parse is returned as it is (Codex refuses it with its own words); `AgentSetupError`
    when the result would not parse."""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        log.warning(
            "codex home: the user's config.toml is not valid TOML (%s); copied as it is", exc
        )
        return text
    exprs = list(_expressions(text))
    dropped = _dropped(exprs)
    kept = [e for e in exprs if e not in dropped]
    tables = {e.keys for e in kept if e.kind == "table"}
    out: list[str] = []
    inside: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    root_lines: list[str] = []
    for full in (*_OFF, *_MEMORIES_OFF):
        if full[:1] in tables:
            inside.setdefault(full[:1], []).append(full)
        else:
            root_lines.append(f"{'.'.join(full)} = false\n")
    if root_lines:
        out.append(_MARK + "".join(root_lines) + "\n")
    for expr in kept:
        piece = text[expr.start : expr.end]
        out.append(piece)
        if expr.kind == "table" and expr.keys in inside:
            # Right after the header (a header's line ends in its newline), before its keys.
            out.append("".join(f"{full[-1]} = false\n" for full in inside.pop(expr.keys)))
    body = "".join(out).rstrip()
    policy = (
        f"{_MARK}[{SHELL_POLICY}]\n"
        'inherit = "all"\n'
        "ignore_default_excludes = true\n"
        f"include_only = [{', '.join(json.dumps(n) for n in names)}]\n"
    )
    hidden = "".join(
        f"\n[[skills.config]]\npath = {json.dumps(path)}\nenabled = false\n" for path in disabled
    )
    result = (body + "\n\n" if body else "") + policy + hidden
    try:
        tomllib.loads(result)
    except tomllib.TOMLDecodeError as exc:
        raise AgentSetupError(
            f"the task's Codex config.toml would not be valid TOML: {exc}"
        ) from exc
    return result


def _dropped(exprs: list[_Expr]) -> set[_Expr]:
    """The user's expressions the task's config replaces or leaves out."""
    dropped: set[_Expr] = set()
    table: tuple[str, ...] = ()
    in_skill_entry = False
    for expr in exprs:
        if expr.kind in ("table", "array"):
            table = expr.keys
            in_skill_entry = expr.kind == "array" and table == ("skills", "config")
            if in_skill_entry or _is_policy(table):
                dropped.add(expr)
            continue
        if in_skill_entry:
            dropped.add(expr)  # the whole entry, comments too
        elif expr.kind == "pair":
            full = table + expr.keys
            if _is_policy(full) or full in _OFF or full in _MEMORIES_OFF:
                dropped.add(expr)
    return dropped


def _is_policy(keys: tuple[str, ...]) -> bool:
    if keys[:1] == (SHELL_POLICY,):
        return True
    return len(keys) >= 3 and keys[0] == "profiles" and keys[2] == SHELL_POLICY


def _expressions(text: str) -> Iterable[_Expr]:
    """The document's top-level pieces in order, each with the newline that ends it (the
    text is known to parse)."""
    at = 0
    while at < len(text):
        line_end = text.find("\n", at)
        line_end = len(text) if line_end < 0 else line_end + 1
        stripped = text[at:line_end].strip()
        if not stripped or stripped.startswith("#"):
            yield _Expr("other", (), at, line_end)
            at = line_end
            continue
        lead = at + len(text[at:line_end]) - len(text[at:line_end].lstrip())
        if text.startswith("[[", lead):
            keys, after = _keys(text, lead + 2, "]")
            yield _Expr("array", keys, at, _line_end(text, after + 2))
            at = _line_end(text, after + 2)
        elif text.startswith("[", lead):
            keys, after = _keys(text, lead + 1, "]")
            yield _Expr("table", keys, at, _line_end(text, after + 1))
            at = _line_end(text, after + 1)
        else:
            keys, after = _keys(text, lead, "=")
            end = _value_end(text, after + 1)
            yield _Expr("pair", keys, at, end)
            at = end


def _line_end(text: str, at: int) -> int:
    """Past the newline of the line `at` is on (a trailing comment included)."""
    found = text.find("\n", at)
    return len(text) if found < 0 else found + 1


def _keys(text: str, at: int, stop: str) -> tuple[tuple[str, ...], int]:
    """A dotted key from `at` up to `stop`: its parts, and where `stop` is."""
    parts: list[str] = []
    while True:
        while text[at] in " \t":
            at += 1
        if text[at] in "\"'":
            end = _string_end(text, at)
            raw = text[at:end]
            parts.append(json.loads(raw) if raw[0] == '"' else raw[1:-1])
            at = end
        else:
            match = _BARE_KEY.match(text, at)
            assert match is not None, "the text parsed, so a key is here"
            parts.append(match.group())
            at = match.end()
        while text[at] in " \t":
            at += 1
        if text[at] == stop:
            return tuple(parts), at
        at += 1  # the dot between parts


def _string_end(text: str, at: int) -> int:
    """Past the string that starts at `at` (basic or literal, one line or several)."""
    quote = text[at]
    triple = text.startswith(quote * 3, at)
    closing = quote * 3 if triple else quote
    i = at + len(closing)
    while True:
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text.startswith(closing, i):
            i += len(closing)
            # A multi-line string may end in up to two more quotes of its own.
            while triple and text.startswith(quote, i):
                i += 1
            return i
        i += 1


def _value_end(text: str, at: int) -> int:
    """Past the newline ending the value that starts after `at` (arrays and inline tables
    may span lines; strings and comments may hold brackets)."""
    depth = 0
    i = at
    while i < len(text):
        char = text[i]
        if char in "\"'":
            i = _string_end(text, i)
            continue
        if char == "#":
            i = text.find("\n", i)
            if i < 0:
                return len(text)
            continue
        if char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "\n" and depth == 0:
            return i + 1
        i += 1
    return len(text)
