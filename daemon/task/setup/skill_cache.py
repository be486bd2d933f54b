"""Skill bundles kept between tasks: owner-only, checked on every read, capped in size.

    <state dir>/skill-cache/<workspace>/<source>/<id>/<hash>/bundle.json

Keyed as Multica's `SkillBundleCache` keys them, each part made a safe name. A bundle is used
only when it still hashes to what the claim's reference says (skill_manifest.py `matches`): a
file changed on disk — by an agent running as the same user, say — is dropped and fetched
again, never handed to an agent. Past `CAP_BYTES` the least recently stored bundles go.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from pathlib import Path

from pydantic import ValidationError

from daemon.boundary.beneath import read_under, write_under
from daemon.files.private import ensure_dir
from daemon.protocol.models import Skill, SkillRef
from daemon.task.setup.skill_manifest import matches

log = logging.getLogger(__name__)

CAP_BYTES = 64 * 1024 * 1024
"""The cache's size cap: skills are text, so this holds hundreds of them."""
BUNDLE = "bundle.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


class SkillBundleCache:
    """Skill bundles by workspace and reference, under one owner-only directory."""

    def __init__(self, root: Path, cap_bytes: int = CAP_BYTES) -> None:
        self.root, self.cap_bytes = root, cap_bytes

    def load(self, workspace_id: str, ref: SkillRef) -> Skill | None:
        """The cached bundle `ref` names, when there is one that still matches it."""
        rel = self._path(workspace_id, ref.source, ref.id, ref.hash)
        text = read_under(self.root, rel, limit=self.cap_bytes) if self.root.is_dir() else None
        if text is None:
            return None
        try:
            bundle = Skill.model_validate_json(text)
        except ValidationError:
            bundle = None
        if bundle is None or not matches(ref, bundle):
            log.warning("skill cache: dropping %s: it does not match its reference", rel)
            with contextlib.suppress(OSError):
                (self.root / rel).unlink()
            return None
        return bundle

    def store(self, workspace_id: str, bundle: Skill) -> None:
        """Keep a checked bundle, then trim the cache to its cap."""
        ensure_dir(self.root)
        rel = self._path(workspace_id, bundle.source, bundle.id, bundle.hash)
        write_under(self.root, rel, bundle.model_dump_json())
        self._trim()

    def _path(self, workspace_id: str, source: str, skill_id: str, digest: str) -> str:
        parts = [_segment(p) for p in (workspace_id, source, skill_id, digest)]
        return "/".join([*parts, BUNDLE])

    def _trim(self) -> None:
        files = []
        for path in self.root.rglob(BUNDLE):
            with contextlib.suppress(OSError):
                info = path.lstat()
                files.append((info.st_mtime, info.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.cap_bytes:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
                total -= size


def _segment(value: str) -> str:
    """A cache path part, as Go's `safeCacheSegment`: `_` for anything unusual, never `.`/`..`."""
    out = _UNSAFE.sub("_", value) or "_"
    return f"_{out}" if out in (".", "..") else out
