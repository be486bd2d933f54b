"""A skill bundle's manifest as Multica computes it (`skillbundle.BuildManifest`): the hash a
reference names, and the check that a bundle is what its reference says."""

from __future__ import annotations

import hashlib

from daemon.boundary.beneath import UnsafePathError, relative_parts
from daemon.protocol.models import Skill, SkillRef


def manifest(skill: Skill) -> tuple[str, int, int]:
    """(hash, size in bytes, file count) of a skill, as Multica's `BuildManifest` makes them."""
    digest = hashlib.sha256()

    def part(value: str) -> None:
        raw = value.encode()
        digest.update(f"{len(raw)}:".encode() + raw + b"\n")

    for value in ("v1", skill.source, skill.id, skill.name, skill.description, skill.content):
        part(value)
    size = len(skill.content.encode())
    for item in sorted(skill.files, key=lambda f: f.path):
        raw = item.content.encode()
        part(item.path)
        part("sha256:" + hashlib.sha256(raw).hexdigest())
        part(item.content)
        size += len(raw)
    return "sha256:" + digest.hexdigest(), size, len(skill.files)


def matches(ref: SkillRef, bundle: Skill) -> bool:
    """Whether `bundle` is what `ref` names, whole: identity, hash, size, files, safe paths."""
    if (bundle.id, bundle.source, bundle.hash) != (ref.id, ref.source, ref.hash):
        return False
    if not all(_safe_path(f.path) for f in bundle.files):
        return False
    digest, size, count = manifest(bundle)
    if digest != ref.hash or count != ref.file_count:
        return False
    return ref.size_bytes <= 0 or size == ref.size_bytes


def self_ref(bundle: Skill) -> SkillRef:
    """The reference a bundle makes of itself (its own hash, size and file count)."""
    digest, size, count = manifest(bundle)
    return SkillRef(
        id=bundle.id,
        source=bundle.source,
        hash=digest,
        size_bytes=size,
        file_count=count,
    )


def _safe_path(path: str) -> bool:
    try:
        return "/".join(relative_parts(path)) == path and "\\" not in path
    except UnsafePathError:
        return False
