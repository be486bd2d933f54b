"""The skills under a provider's roots: listed with `file_count`, or one loaded for import.

A skill is a folder with a `SKILL.md`, found up to four levels below a root (a skill's folder
ends its branch); its key is its path below the root (a plugin's prefixed `<plugin>:`). Its
supporting files are those that survive a JSON round trip — text, not hidden, no NUL, at most
1 MiB each, 256 and 8 MiB in all — and `file_count` counts them and the `SKILL.md`. As in
Multica, links are followed: the home is the user's own, read with the user's own rights.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from daemon.local_skills.roots import (
    MAX_BUNDLE,
    MAX_DEPTH,
    MAX_FILE,
    MAX_FILES,
    Root,
    skill_roots,
)

_BINARY = frozenset((
    ".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp", ".tiff", ".ico", ".heic", ".ttf", ".otf",
    ".woff", ".woff2", ".eot", ".zip", ".gz", ".tar", ".bz2", ".7z", ".rar", ".pdf", ".docx",
    ".xlsx", ".pptx", ".doc", ".xls", ".ppt", ".mp3", ".mp4", ".wav", ".avi", ".mov", ".webm",
    ".m4a", ".flac", ".exe", ".dll", ".so", ".dylib", ".class", ".jar", ".wasm", ".db",
    ".sqlite", ".sqlite3", ".pyc",
))  # fmt: skip
"""Extensions of files that cannot survive a JSON round trip (Multica's list), skipped unread."""
# Each provider's user-level skill folder: (variable naming its home, the home's default
# under HOME, the folder under that home).


_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)


def list_skills(
    provider: str, home: str, env: Mapping[str, str]
) -> tuple[list[dict[str, Any]], bool]:
    """Every skill under the provider's roots (the first root to have a key wins), sorted."""
    roots = skill_roots(provider, home, env)
    if roots is None:
        return [], False
    found: dict[str, dict[str, Any]] = {}
    for root in roots:
        if not os.path.exists(root.path):
            continue
        here: list[dict[str, Any]] = []
        _walk(provider, home, root, root.path, 0, set(), here)
        for skill in here:
            found.setdefault(skill["key"], skill)
    return [found[key] for key in sorted(found)], True


def load_skill(provider: str, home: str, env: Mapping[str, str], key: str) -> dict[str, Any]:
    """The bundle of the skill `key` as the list named it (its first root's); LookupError when
    no root has it, ValueError for a key that leaves its root."""
    roots = skill_roots(provider, home, env)
    if roots is None:
        raise LookupError(f'provider "{provider}" does not expose runtime local skills')
    key = _clean_key(key)
    for root in roots:
        if root.key_prefix and not key.startswith(root.key_prefix):
            continue
        folder = os.path.join(root.path, *key.removeprefix(root.key_prefix).split("/"))
        if not os.path.isfile(os.path.join(folder, "SKILL.md")):
            continue
        content = _main_file(folder)
        name, description = front_matter(content)
        name = key if root.plugin else name or os.path.basename(folder)
        return {
            "name": name,
            "description": description,
            "content": content,
            "source_path": _home_relative(folder, home),
            "provider": provider,
            "files": _files(folder, with_content=True),
        }
    raise LookupError("local skill not found")


def front_matter(content: str) -> tuple[str, str]:
    """`name` and `description` of a `SKILL.md` front matter (plain, quoted or block scalars)."""
    found = _FRONT.match(content)
    if not found:
        return "", ""
    values: dict[str, str] = {}
    lines = found.group(1).splitlines()
    i = 0
    while i < len(lines):
        key, sep, raw = lines[i].partition(":")
        i += 1
        if not sep or key != key.strip() or key not in ("name", "description"):
            continue
        raw = raw.strip()
        if raw[:1] in ("|", ">"):
            block = []
            while i < len(lines) and (not lines[i].strip() or lines[i][:1] in (" ", "\t")):
                block.append(lines[i].strip())
                i += 1
            values[key] = ("\n" if raw[0] == "|" else " ").join(block).strip()
        elif raw[:1] == '"':
            try:
                values[key] = str(json.loads(raw))
            except ValueError:
                values[key] = raw.strip('"')
        elif raw[:1] == "'":
            values[key] = raw[1:-1].replace("''", "'") if raw.endswith("'") else raw[1:]
        else:
            values[key] = raw.split(" #", 1)[0].strip()
    return values.get("name", "").strip(), values.get("description", "").strip()


def _walk(
    provider: str,
    home: str,
    root: Root,
    here: str,
    depth: int,
    seen: set[str],
    out: list[dict[str, Any]],
) -> None:
    """Skill folders below `here` (a folder with a SKILL.md ends its branch)."""
    if depth > MAX_DEPTH:
        return
    real = os.path.realpath(here)
    if real in seen:
        return
    seen.add(real)
    try:
        names = sorted(os.listdir(here))
    except OSError:
        return
    for name in names:
        path = os.path.join(here, name)
        if _ignored(name) or not os.path.isdir(path):
            continue
        if not os.path.isfile(os.path.join(path, "SKILL.md")):
            _walk(provider, home, root, path, depth + 1, seen, out)
            continue
        try:
            key = root.key_prefix + _clean_key(os.path.relpath(path, root.path))
            content = _main_file(path)
            files = _files(path, with_content=False)
        except (OSError, ValueError):
            continue
        name_of, description = front_matter(content)
        skill = {
            "key": key,
            "name": key if root.plugin else name_of or os.path.basename(path),
            "description": description,
            "source_path": _home_relative(path, home),
            "provider": provider,
            "root": root.kind,
            "plugin": root.plugin,
            "can_disable": provider in ("codex", "claude"),
            "file_count": len(files) + 1,
        }
        out.append({k: v for k, v in skill.items() if v != "" and v is not False})


def _files(folder: str, *, with_content: bool) -> list[dict[str, str]]:
    """The supporting files of a skill folder that survive a JSON round trip, sorted."""
    top = os.path.realpath(folder)
    files: list[dict[str, str]] = []
    total = 0
    for here, dirs, names in os.walk(top):
        dirs[:] = sorted(
            d for d in dirs if not _ignored(d) and not os.path.islink(os.path.join(here, d))
        )
        for name in sorted(names):
            path = os.path.join(here, name)
            rel = os.path.relpath(path, top).replace(os.sep, "/")
            if _ignored(name) or name.lower() == "skill.md" or os.path.islink(path):
                continue
            if os.path.splitext(name)[1].lower() in _BINARY:
                continue
            try:
                if os.path.getsize(path) > MAX_FILE:
                    continue
                with open(path, "rb") as source:
                    data = source.read(MAX_FILE + 1)
                text = data.decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if "\x00" in text:
                continue
            if len(files) >= MAX_FILES:
                raise ValueError(f"local skill exceeds {MAX_FILES} files")
            total += len(data)
            if total > MAX_BUNDLE:
                raise ValueError(f"local skill exceeds {MAX_BUNDLE} bytes in total")
            files.append({"path": rel, "content": text} if with_content else {"path": rel})
    return sorted(files, key=lambda f: f["path"])


def _main_file(folder: str) -> str:
    path = os.path.join(folder, "SKILL.md")
    if os.path.getsize(path) > MAX_FILE:
        raise ValueError(f"SKILL.md exceeds {MAX_FILE} bytes")
    with open(path, encoding="utf-8", errors="replace") as source:
        return source.read(MAX_FILE)


def _clean_key(key: str) -> str:
    cleaned = os.path.normpath(key.strip()).replace(os.sep, "/") if key.strip() else ""
    if cleaned in ("", ".") or cleaned.startswith(("/", "..")):
        raise ValueError("invalid skill key")
    return cleaned


def _ignored(name: str) -> bool:
    return (
        not name or name.startswith(".") or name.lower() in ("license", "license.md", "license.txt")
    )


def _home_relative(path: str, home: str) -> str:
    if home and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")) :]
    return path
