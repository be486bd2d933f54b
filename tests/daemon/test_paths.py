"""Ids from the server as path components."""

from __future__ import annotations

from daemon.files.private import path_part


def test_a_uuid_is_its_own_path_part() -> None:
    """Plain ids (Multica's UUIDs) keep their spelling, as in Multica's own layout."""
    uuid = "0190f5e2-7c1a-7d3e-9b2a-1f2e3d4c5b6a"
    assert path_part(uuid) == uuid


def test_ids_that_differ_only_in_unsafe_characters_stay_apart() -> None:
    """`a.b`, `a_b`, `a/b`, `a b`, empty, `.` and `..` are seven names; none a dot name."""
    parts = {path_part(v) for v in ("a.b", "a_b", "a/b", "a b", "", ".", "..")}
    assert len(parts) == 7
    assert all("/" not in p and p not in (".", "..") and not p.startswith(".") for p in parts)


def test_a_300_character_id_is_a_short_name() -> None:
    """No ENAMETOOLONG: a long id is a readable prefix plus its hash, still unique."""
    assert len(path_part("w" * 300)) < 64
    assert path_part("w" * 300) != path_part("w" * 299)
    assert path_part("x" * 64) == "x" * 64 and "." in path_part("x" * 65)
