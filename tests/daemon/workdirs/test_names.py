"""Cache, checkout and branch names are Go's, and none of them climbs out of its directory."""

from __future__ import annotations

import pytest

from daemon.files.private import path_part
from daemon.workdirs.names import (
    bare_dir_name,
    branch_name,
    repo_name,
    sanitize_name,
    task_dir_name,
    task_key,
)


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/org/my-repo.git", "github.com+org+my-repo.git"),
        ("git@github.com:org/my-repo", "github.com+org+my-repo.git"),
        ("git@github.com:foo/bar-baz.git", "github.com+foo+bar-baz.git"),
        ("git@github.com:foo-bar/baz.git", "github.com+foo-bar+baz.git"),
        ("git@gitlab.example.com:org/repo.git", "gitlab.example.com+org+repo.git"),
        ("ssh://git@gitlab.example.com:22/g/s/r.git", "gitlab.example.com%3A22+g+s+r.git"),
        ("git@gitlab.example.com-22:org/repo.git", "gitlab.example.com-22+org+repo.git"),
        ("my-repo", "my-repo.git"),
        ("file:///srv/git/app.git", "file+srv+git+app.git"),
    ],
)
def test_the_cache_is_named_as_go_names_it(url: str, name: str) -> None:
    """Go's own examples (`bareDirName`), and a `file://` URL as Go's parser splits it."""
    assert bare_dir_name(url) == name


def test_a_cache_name_is_always_one_plain_component() -> None:
    """Dot segments stay inside one name; an overlong one is hashed, never cut into another."""
    assert bare_dir_name("https://h/../../etc") == "h+..+..+etc.git"
    long = bare_dir_name("https://h/" + "x" * 300)
    assert "/" not in long and len(long) < 100 and long.endswith(".git")
    assert not bare_dir_name("..").startswith(".")


@pytest.mark.parametrize(
    ("url", "name"),
    [
        ("https://github.com/org/my-repo.git", "my-repo"),
        ("git@github.com:org/app", "app"),
        ("git@host:app.git", "app"),
        ("https://h/x/..", "repo"),
        ("https://h/x/.", "repo"),
        ("", "repo"),
    ],
)
def test_the_checkout_directory_is_the_repos_last_segment(url: str, name: str) -> None:
    """`..` or `.` as the last segment would leave the work dir: it becomes `repo`."""
    assert repo_name(url) == name


def test_the_branch_is_agent_name_and_the_task_ids_tail() -> None:
    """`agent/<sanitised name>/<last 12 hex>`: the id's random tail, not its clock head."""
    task = "0190f3c2-7a1b-7c3d-8e4f-a1b2c3d4e5f6"
    assert task_key(task) == "a1b2c3d4e5f6"
    assert branch_name("Review Bot!", task) == "agent/review-bot/a1b2c3d4e5f6"
    assert sanitize_name("  ") == "agent"
    assert sanitize_name("A" * 29 + " b") == "a" * 29


def test_the_task_directory_is_gos_task_key() -> None:
    """Go's `PredictRootDir` segment: the last 12 hex digits of the id, dashes dropped, a short
    id whole; an id that is no plain path component stays the hashed whole id."""
    assert task_dir_name("0190f3c2-7a1b-7c3d-8e4f-a1b2c3d4e5f6") == "a1b2c3d4e5f6"
    assert task_dir_name("t-1") == "t1"
    odd = "../../" + "x" * 20
    assert task_dir_name(odd) == path_part(odd) != task_key(odd)
