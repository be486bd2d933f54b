"""The daemon's git: no variable of its own shell leaks in, no transport but the safe ones."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from daemon.errors import GitError
from daemon.workdirs.cache import RepoCache
from daemon.workdirs.git import Git, check_ref, check_url, git_env, redact
from tests.fakes.repo_checkout import make_origin


def test_gits_and_the_daemons_variables_stay_out() -> None:
    """GIT_DIR, GIT_CONFIG_* and the daemon's MULTICA_* never reach git; prompts are off."""
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/u",
        "GIT_DIR": "/elsewhere",
        "GIT_CONFIG_COUNT": "1",
        "git_ssh_command": "evil",
        "MULTICA_DAEMON_TOKEN": "secret",
    }
    env = git_env(base)
    assert env == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/u",
        "GIT_TERMINAL_PROMPT": "0",
        "SSH_ASKPASS_REQUIRE": "never",
    }


def test_a_gitdir_in_the_daemons_environment_does_not_redirect_git(tmp_path: Path) -> None:
    """With GIT_DIR pointing at another repository, git still reads the one it is run in."""
    url = make_origin(tmp_path, "real")
    decoy = make_origin(tmp_path, "decoy", branches={"decoy-only": "x"})
    git = Git({"PATH": "/usr/bin:/bin", "GIT_DIR": decoy.removeprefix("file://")})
    refs = git.run(["for-each-ref", "--format=%(refname)"], cwd=Path(url.removeprefix("file://")))
    assert refs == "refs/heads/main"


@pytest.mark.parametrize(
    "url",
    ["", "-u", "--upload-pack=touch x", "ext::sh -c touch% x", "fd::3", "https://h/a\nb"],
)
def test_urls_git_could_read_as_an_option_or_a_command_are_refused(url: str) -> None:
    """An option, a remote helper (`ext::` runs a command) or a control character."""
    assert check_url(url) is not None


def test_plain_urls_and_refs_pass() -> None:
    """https, ssh, scp form, file:// and paths; branch, tag or commit names."""
    for url in ("https://github.com/o/r.git", "ssh://git@h/r", "git@h:o/r", "file:///srv/r.git"):
        assert check_url(url) is None
    for ref in ("", "main", "v1.2", "feature/x", "0123abcd"):
        assert check_ref(ref) is None
    assert check_ref("--orphan") is not None and check_ref("a b") is not None


def test_git_itself_refuses_any_other_transport(tmp_path: Path) -> None:
    """Past the check, git's policy still refuses `ext::` and a remote helper on the PATH
    (which git would run by default), and runs neither."""
    pwned = tmp_path / "pwned"
    helper = tmp_path / "bin" / "git-remote-evil"
    helper.parent.mkdir()
    helper.write_text(f"#!/bin/sh\ntouch {pwned}\n")
    helper.chmod(0o755)
    git = Git({"PATH": f"{helper.parent}:/usr/bin:/bin"})
    for url in (f"ext::sh -c touch% {pwned}", "evil::somewhere"):
        with pytest.raises(GitError, match="not allowed"):
            git.run(["clone", "--bare", "--", url, str(tmp_path / "c")])
    assert not pwned.exists()


def test_a_missing_git_is_a_clear_error() -> None:
    """No git on the PATH: every call says so, none raises anything else."""
    git = Git({"PATH": "/nonexistent"})
    assert not git.available
    with pytest.raises(GitError, match="git is not installed"):
        git.run(["--version"])


def test_a_git_past_its_deadline_is_killed(tmp_path: Path) -> None:
    """A call that outlives its timeout ends with an error naming the timeout."""
    git = Git({"PATH": "/usr/bin:/bin"})
    (tmp_path / "slow").write_text("#!/bin/sh\nsleep 30\n")
    (tmp_path / "slow").chmod(0o755)
    with pytest.raises(GitError, match=r"timed out after 0\.3s"):
        git.run(["-c", f"alias.slow=!{tmp_path / 'slow'}", "slow"], timeout=0.3)


def test_a_token_in_a_repository_url_is_never_logged_or_answered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A clone that fails for a URL carrying `user:token@` says what failed without the token."""
    url = "http://agent:s3cret-token@127.0.0.1:9/org/app.git"
    cache = RepoCache(tmp_path, Git({"PATH": "/usr/bin:/bin"}))
    caplog.set_level(logging.INFO)
    error = cache.sync("ws", [url])
    assert error and "127.0.0.1:9/org/app.git" in error
    assert "s3cret" not in error and "s3cret" not in caplog.text
    assert "127.0.0.1:9/org/app.git" in caplog.text
    assert redact("fatal: https://u:p@h/r and ssh://git@h/r") == "fatal: https://h/r and ssh://h/r"
