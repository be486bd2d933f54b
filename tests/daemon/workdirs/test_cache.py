"""The repository cache and a task's checkout, on real repositories (no daemon around them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from daemon.errors import GitError, RepoBusyError
from daemon.workdirs.cache import RepoCache
from daemon.workdirs.git import Git
from daemon.workdirs.worktree import check_out
from tests.fakes.repo_checkout import git, make_origin

WS = "ws-1"


def _cache(tmp_path: Path) -> RepoCache:
    return RepoCache(tmp_path / "workspaces", Git({"PATH": "/usr/bin:/bin"}))


def _ready(cache: RepoCache, url: str) -> Path:
    bare = cache.bare_path(WS, url)
    with cache.locked(bare, None):
        cache.ensure(bare, url)
    return bare


def test_the_cache_keeps_the_remotes_branches_apart_from_the_tasks(tmp_path: Path) -> None:
    """A bare clone under `.repos/<workspace>/`, fetching into refs/remotes/origin/*."""
    url = make_origin(tmp_path / "o", branches={"feature": "f"})
    cache = _cache(tmp_path)
    bare = _ready(cache, url)
    assert bare.parent == tmp_path / "workspaces" / ".repos" / WS and cache.is_cached(WS, url)
    assert git("config", "remote.origin.fetch", cwd=bare) == "+refs/heads/*:refs/remotes/origin/*"
    refs = git("for-each-ref", "--format=%(refname)", "refs/remotes/origin/", cwd=bare).split()
    assert "refs/remotes/origin/feature" in refs and "refs/remotes/origin/main" in refs


def test_a_custom_default_branch_is_found(tmp_path: Path) -> None:
    """A remote whose default is `trunk` (no main, no master) bases checkouts on trunk."""
    seed = tmp_path / "seed"
    seed.mkdir()
    git("init", "--quiet", "--initial-branch=trunk", cwd=seed)
    (seed / "f").write_text("t")
    git("add", "f", cwd=seed)
    git("commit", "--quiet", "-m", "t", cwd=seed)
    git("checkout", "--quiet", "-b", "other", cwd=seed)
    git("checkout", "--quiet", "trunk", cwd=seed)
    cache = _cache(tmp_path)
    bare = _ready(cache, f"file://{seed}")
    assert cache.base_ref(bare, "") == "refs/remotes/origin/trunk"
    assert cache.base_ref(bare, "other") == "refs/remotes/origin/other"
    with pytest.raises(GitError, match="cannot resolve the requested ref"):
        cache.base_ref(bare, "missing")


def test_a_failed_clone_leaves_no_half_cache(tmp_path: Path) -> None:
    """A URL that does not clone leaves nothing that would pass for a cache."""
    cache = _cache(tmp_path)
    assert "nowhere" in cache.sync(WS, ["file:///nowhere/x.git"])
    assert not cache.bare_path(WS, "file:///nowhere/x.git").exists()


def test_a_busy_cache_is_refused_after_the_wait(tmp_path: Path) -> None:
    """While one operation holds a cache, another waiting a bounded time gets RepoBusyError."""
    cache = _cache(tmp_path)
    bare = cache.bare_path(WS, "file:///x.git")
    with cache.locked(bare, None), pytest.raises(RepoBusyError):  # noqa: SIM117
        with cache.locked(bare, 0.05):
            pass


def test_a_clean_reused_checkout_moves_to_the_new_branch_keeping_the_old(tmp_path: Path) -> None:
    """Committed work stays on the old branch; the new task's branch starts from the base."""
    url = make_origin(tmp_path / "o")
    cache = _cache(tmp_path)
    bare = _ready(cache, url)
    path = tmp_path / "work" / "app"
    path.parent.mkdir()
    first = check_out(
        cache.git, bare, url, path, "agent/a/111111111111", "refs/remotes/origin/main"
    )
    (path / "done.txt").write_text("x")
    git("add", "done.txt", cwd=path)
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "-m", "x", cwd=path)
    second = check_out(
        cache.git, bare, url, path, "agent/a/222222222222", "refs/remotes/origin/main"
    )
    assert (first.branch, second.branch, second.kept) == (
        "agent/a/111111111111",
        "agent/a/222222222222",
        False,
    )
    assert not (path / "done.txt").exists()
    assert git("show", "agent/a/111111111111:done.txt", cwd=path) == "x"


def test_a_taken_branch_name_gets_a_time_suffix(tmp_path: Path) -> None:
    """As Go: a branch of that name left by an earlier run makes `<name>-<unix time>`."""
    url = make_origin(tmp_path / "o")
    cache = _cache(tmp_path)
    bare = _ready(cache, url)
    git("branch", "agent/a/333333333333", "refs/remotes/origin/main", cwd=bare)
    (tmp_path / "w").mkdir()
    done = check_out(
        cache.git,
        bare,
        url,
        tmp_path / "w" / "app",
        "agent/a/333333333333",
        "refs/remotes/origin/main",
    )
    assert done.branch.startswith("agent/a/333333333333-")


def test_a_path_that_is_not_this_caches_worktree_is_refused(tmp_path: Path) -> None:
    """A link, a plain directory, or another repository's worktree at the path: no checkout."""
    url = make_origin(tmp_path / "o")
    other = make_origin(tmp_path / "o", "other")
    cache = _cache(tmp_path)
    bare, other_bare = _ready(cache, url), _ready(cache, other)
    work = tmp_path / "w"
    work.mkdir()
    base = "refs/remotes/origin/main"
    check_out(cache.git, other_bare, other, work / "theirs", "agent/a/1", base)
    check_out(cache.git, other_bare, other, work / "cloned", "agent/a/1", base, isolated=True)
    (work / "link").symlink_to(tmp_path / "o")
    (work / "plain").mkdir()
    refused = {
        "theirs": "worktree of another repository",
        "cloned": "clone of another repository",
        "link": "symbolic link",
        "plain": "not a worktree",
    }
    for name, said in refused.items():
        with pytest.raises(GitError, match=said):
            check_out(cache.git, bare, url, work / name, "agent/a/2", base)


def test_an_isolated_checkout_has_its_own_git_dir_and_the_real_origin(tmp_path: Path) -> None:
    """`isolated`: a clone whose .git is inside the work dir, `origin` the repository's URL,
    none of the cache's other branches; a commit there touches nothing in the cache; reused,
    it keeps uncommitted work like a worktree."""
    url = make_origin(tmp_path / "o", branches={"feature": "f"})
    cache = _cache(tmp_path)
    bare = _ready(cache, url)
    git("branch", "agent/other/999999999999", "refs/remotes/origin/main", cwd=bare)
    path = tmp_path / "w" / "app"
    path.parent.mkdir()
    base = "refs/remotes/origin/feature"
    done = check_out(cache.git, bare, url, path, "agent/a/444444444444", base, isolated=True)
    assert (done.branch, done.kept) == ("agent/a/444444444444", False)
    assert (path / ".git").is_dir() and (path / "README.md").read_text() == "f\n"
    assert git("remote", "get-url", "origin", cwd=path) == url
    assert git("for-each-ref", "--format=%(refname)", "refs/heads/", cwd=path).split() == [
        "refs/heads/agent/a/444444444444"
    ]
    (path / "README.md").write_text("changed\n")
    git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "--quiet", "-am", "x", cwd=path)
    assert "agent/a/444444444444" not in git("branch", "--list", cwd=bare)
    (path / "scratch.txt").write_text("wip")
    again = check_out(cache.git, bare, url, path, "agent/a/555555555555", base)
    assert (again.branch, again.kept) == ("agent/a/444444444444", True)
    assert (path / "scratch.txt").read_text() == "wip"


def test_asking_again_keeps_the_branch_unless_another_base_is_asked_for(tmp_path: Path) -> None:
    """The same task's second checkout stays on its branch with its commits; one naming a ref
    the branch is not built on gets a new branch from that ref (Go's suffix)."""
    url = make_origin(tmp_path / "o", branches={"feature": "f"})
    cache = _cache(tmp_path)
    bare = _ready(cache, url)
    path = tmp_path / "w" / "app"
    path.parent.mkdir()
    main, feature = "refs/remotes/origin/main", "refs/remotes/origin/feature"
    check_out(cache.git, bare, url, path, "agent/a/666666666666", main)
    git(
        "-c",
        "user.name=a",
        "-c",
        "user.email=a@b",
        "commit",
        "--quiet",
        "--allow-empty",
        "-m",
        "mine",
        cwd=path,
    )
    again = check_out(cache.git, bare, url, path, "agent/a/666666666666", main)
    other = check_out(cache.git, bare, url, path, "agent/a/666666666666", feature)
    assert (again.branch, again.kept) == ("agent/a/666666666666", True)
    assert other.branch.startswith("agent/a/666666666666-") and not other.kept
    assert (path / "README.md").read_text() == "f\n"
