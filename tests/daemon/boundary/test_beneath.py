"""Directory handles in a tree someone else can write: no link followed, no depth limit."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from daemon.boundary import beneath
from daemon.boundary.beneath import (
    entries_at,
    opened_dir,
    read_at,
    remove_at,
    remove_under,
    size_at,
    walk_at,
)


def _chain(top: Path, depth: int) -> Path:
    """`top/d/d/.../d` (`depth` folders) with a 3-byte file at the bottom; the bottom's path."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    file = os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
    os.write(file, b"abc")
    os.close(file)
    os.close(fd)
    return top.joinpath(*["d"] * depth)


def test_a_link_is_removed_as_itself_never_its_target(tmp_path: Path) -> None:
    """A tree holding links to a folder and a file outside loses the links, not what they name."""
    outside = tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "file").write_text("keep")
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "to-dir").symlink_to(outside / "keep")
    (tree / "to-file").symlink_to(outside / "file")
    remove_under(tmp_path, "tree")
    assert not tree.exists()
    assert (outside / "keep").is_dir() and (outside / "file").read_text() == "keep"


def test_a_chain_deeper_than_the_recursion_limit_and_the_open_handles_is_removed(
    tmp_path: Path,
) -> None:
    """1,100 folders deep: measured and removed with at most `MAX_OPEN` handles held."""
    (tmp_path / "t").mkdir()
    _chain(tmp_path / "t", 1100)
    before = len(os.listdir("/proc/self/fd"))
    held: list[int] = []

    def visit(parent: int, name: str, info: os.stat_result) -> None:
        held.append(len(os.listdir("/proc/self/fd")) - before)

    with opened_dir(tmp_path, "t") as fd:
        assert size_at(fd) == 3
        assert walk_at(fd, lambda *_: True, visit) == []
    assert held and held[0] <= beneath.MAX_OPEN + 2  # the walk's chain, the anchor, listdir's
    remove_under(tmp_path, "t")
    assert not (tmp_path / "t").exists()


def test_a_folder_moved_out_during_a_walk_stops_it(tmp_path: Path) -> None:
    """Climbing back past a handle let go, a walk whose folder was moved elsewhere stops
    (ESTALE) instead of acting in the folder's new parent."""
    (tmp_path / "t").mkdir()
    bottom = _chain(tmp_path / "t", beneath.MAX_OPEN + 8)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    left: list[int] = []

    def visit(parent: int, name: str, info: os.stat_result) -> None:
        if name == "f":  # at the bottom: move the third folder, with all below it, away
            (tmp_path / "t" / "d" / "d" / "d").rename(elsewhere / "d")

    def leave(parent: int, name: str) -> None:
        left.append(os.fstat(parent).st_ino)

    with opened_dir(tmp_path, "t") as fd:
        errors = walk_at(fd, lambda *_: True, visit, leave)
    assert [e.errno for e in errors] == [errno.ESTALE]
    assert os.stat(elsewhere).st_ino not in left
    assert not bottom.exists()


def test_a_handle_walk_refuses_a_link_on_the_way(tmp_path: Path) -> None:
    """A component that is a link stops the walk (ELOOP), wherever it points."""
    (tmp_path / "real").mkdir()
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "via").symlink_to(tmp_path / "real")
    with pytest.raises(OSError) as caught, opened_dir(tmp_path, "tree/via"):
        pass
    assert caught.value.errno in (errno.ELOOP, errno.ENOTDIR)


def test_only_a_regular_file_its_user_could_read_is_read(tmp_path: Path) -> None:
    """A FIFO and a link are refused at once; `readable_by` refuses a file closed to that user."""
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "secret").write_text("s")
    (tmp_path / "secret").chmod(0o600)
    (tmp_path / "link").symlink_to(tmp_path / "secret")
    with opened_dir(tmp_path) as fd:
        for name in ("fifo", "link"):
            with pytest.raises(OSError):
                read_at(fd, name, 10)
        uid = os.stat(tmp_path / "secret").st_uid
        assert read_at(fd, "secret", 10, readable_by=(uid, 0)) == b"s"
        with pytest.raises(PermissionError):
            read_at(fd, "secret", 10, readable_by=(uid + 1, 12345))


def test_a_folder_is_enterable_by_whom_its_bits_let_list_and_search_it(tmp_path: Path) -> None:
    """Owner, group, then others: each needs both read and search (x) on the folder."""
    folder = tmp_path / "f"
    folder.mkdir()
    uid, gid = os.stat(folder).st_uid, os.stat(folder).st_gid
    for mode, owner, group, other in (
        (0o700, True, False, False),
        (0o750, True, True, False),
        (0o705, True, False, True),
        (0o600, False, False, False),
    ):
        folder.chmod(mode)
        info = os.stat(folder)
        seen = (
            beneath.may_enter(info, (uid, gid)),
            beneath.may_enter(info, (uid + 1, gid)),
            beneath.may_enter(info, (uid + 1, gid + 1)),
        )
        assert seen == (owner, group, other), oct(mode)


def test_entries_are_listed_as_themselves(tmp_path: Path) -> None:
    """A link to a folder is listed as a link, never as the folder."""
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "dir")
    with opened_dir(tmp_path) as fd:
        kinds = {name: stat.S_IFMT(info.st_mode) for name, info in entries_at(fd)}
        remove_at(fd, "link")
    assert kinds == {"dir": stat.S_IFDIR, "link": stat.S_IFLNK}
    assert (tmp_path / "dir").is_dir()
