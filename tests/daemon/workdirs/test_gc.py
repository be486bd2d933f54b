"""A GC round over real task directories, deciding by each one's parent record (fake clock)."""

from __future__ import annotations

from pathlib import Path

from daemon.protocol.gc_check import ParentState
from daemon.workdirs import gc_meta
from daemon.workdirs.gc_meta import GcMeta
from daemon.workdirs.leases import DirLeases
from daemon.workdirs.names import task_dir_name
from tests.daemon.workdirs.support import FakeLookup, age_dir, ago, collector, task_dir

WS = "ws-1"


def _issue(issue_id: str) -> GcMeta:
    return GcMeta(gc_meta.ISSUE, WS, issue_id=issue_id)


def test_a_done_issue_goes_an_open_one_and_a_held_one_stay(tmp_path: Path) -> None:
    """Done past the TTL: removed; open: kept; done but held by a running task: kept."""
    done = task_dir(tmp_path, "t-done", _issue("i-done"))
    open_ = task_dir(tmp_path, "t-open", _issue("i-open"))
    running = task_dir(tmp_path, "t-running", _issue("i-done"))
    lookup = FakeLookup(
        issue_states={
            "i-done": ParentState(True, "done", ago(30)),
            "i-open": ParentState(True, "in_progress", ago(30)),
        }
    )
    leases = DirLeases()
    assert leases.hold(running)
    stats = collector(tmp_path, lookup, leases).run_round()
    assert not done.exists()
    assert open_.exists() and running.exists()
    assert stats.cleaned == 1 and stats.bytes_reclaimed > 0
    # One batch for the workspace, each issue once.
    assert lookup.asked == [(WS, ["i-done", "i-open"])]


def test_an_issue_done_within_the_ttl_stays(tmp_path: Path) -> None:
    """Done an hour ago with a 24h TTL: kept, so a reopened issue finds its work."""
    kept = task_dir(tmp_path, "t", _issue("i"))
    lookup = FakeLookup(issue_states={"i": ParentState(True, "cancelled", ago(1))})
    collector(tmp_path, lookup).run_round()
    assert kept.exists()


def test_no_answer_keeps_every_directory(tmp_path: Path) -> None:
    """A server outage costs the round: nothing is removed, old orphan-like dirs included."""
    dirs = [
        task_dir(tmp_path, "a", _issue("i")),
        task_dir(tmp_path, "b", GcMeta("chat", WS, chat_session_id="c")),
    ]
    for d in dirs:
        age_dir(d, 500)
    stats = collector(tmp_path, FakeLookup(down=True)).run_round()
    assert all(d.exists() for d in dirs)
    assert stats.skipped == 2


def test_build_outputs_of_an_open_issue_go_after_the_artifact_ttl(tmp_path: Path) -> None:
    """An open issue keeps its dir, but node_modules of a task done 13h ago is removed; a
    .git below is never searched, and a recent task keeps its outputs."""
    old = task_dir(tmp_path, "old", _issue("i"), completed=ago(13))
    recent = task_dir(tmp_path, "recent", _issue("i"), completed=ago(2))
    for d in (old, recent):
        (d / "workdir" / "web" / "node_modules" / "pkg").mkdir(parents=True)
        (d / "workdir" / "web" / "node_modules" / "pkg" / "index.js").write_text("x" * 1000)
        (d / "workdir" / ".git" / "node_modules").mkdir(parents=True)
        (d / "workdir" / "dist").mkdir()
    lookup = FakeLookup(issue_states={"i": ParentState(True, "todo", ago(100))})
    stats = collector(tmp_path, lookup).run_round()
    assert not (old / "workdir" / "web" / "node_modules").exists()
    assert (old / "workdir" / ".git" / "node_modules").exists()
    assert (old / "workdir" / "dist").exists() and (old / "workdir" / "main.py").exists()
    assert (recent / "workdir" / "web" / "node_modules" / "pkg" / "index.js").exists()
    assert stats.artifact_removed == 1 and stats.by_pattern == {"node_modules": 1}
    assert stats.bytes_reclaimed == 1000


def test_a_link_to_outside_is_never_followed(tmp_path: Path) -> None:
    """A link an agent left to a directory outside survives its task dir's removal."""
    outside = tmp_path / "precious"
    (outside / "node_modules").mkdir(parents=True)
    (outside / "keep.txt").write_text("mine")
    root = tmp_path / "root"
    gone = task_dir(root, "t", _issue("i"), completed=ago(20))
    (gone / "workdir" / "link").symlink_to(outside)
    lookup = FakeLookup(issue_states={"i": ParentState(True, "todo", ago(100))})
    collector(root, lookup).run_round()  # artifacts pass: must not enter the link
    assert (outside / "node_modules").exists()
    lookup.issue_states["i"] = ParentState(True, "done", ago(100))
    collector(root, lookup).run_round()
    assert not gone.exists()
    assert (outside / "keep.txt").read_text() == "mine"


def test_orphans_go_at_the_orphan_ttl(tmp_path: Path) -> None:
    """No meta (a crash) or an issue the server does not know: removed only past 72h."""
    young = task_dir(tmp_path, "young")
    old = task_dir(tmp_path, "old")
    unknown = task_dir(tmp_path, "unknown", _issue("gone"))
    age_dir(young, 10)
    age_dir(old, 80)
    age_dir(unknown, 80)
    stats = collector(tmp_path, FakeLookup()).run_round()
    assert young.exists()
    assert not old.exists() and not unknown.exists()
    assert stats.orphaned == 2


def test_chats_runs_and_quick_creates_follow_their_records(tmp_path: Path) -> None:
    """A deleted chat goes at once, an active one stays; a finished autopilot run and a
    finished quick-create task go; the daemon's own `task` kind waits for the TTL."""
    lookup = FakeLookup(
        records={
            "chat-live": ParentState(True, "active", ago(500)),
            "run-done": ParentState(True, "issue_created", ago(1)),
            "run-busy": ParentState(True, "running", ago(1)),
            "qc": ParentState(True, "completed", ago(1)),
            "own-old": ParentState(True, "failed", ago(30)),
            "own-new": ParentState(True, "completed", ago(1)),
        }
    )
    metas = {
        "chat-deleted": GcMeta(gc_meta.CHAT, WS, chat_session_id="chat-gone"),
        "chat-live": GcMeta(gc_meta.CHAT, WS, chat_session_id="chat-live"),
        "run-done": GcMeta(gc_meta.AUTOPILOT_RUN, WS, autopilot_run_id="run-done"),
        "run-busy": GcMeta(gc_meta.AUTOPILOT_RUN, WS, autopilot_run_id="run-busy"),
        "qc": GcMeta(gc_meta.QUICK_CREATE, WS, task_id="qc"),
        "own-old": GcMeta(gc_meta.TASK, WS, task_id="own-old"),
        "own-new": GcMeta(gc_meta.TASK, WS, task_id="own-new"),
    }
    dirs = {name: task_dir(tmp_path, name, meta) for name, meta in metas.items()}
    collector(tmp_path, lookup).run_round()
    left = {name for name, d in dirs.items() if d.exists()}
    assert left == {"chat-live", "run-busy", "own-new"}


def test_a_users_own_directory_is_never_removed_whole(tmp_path: Path) -> None:
    """`local_directory` (written by Multica's daemon): a done issue only loses outputs."""
    meta = GcMeta(gc_meta.ISSUE, WS, issue_id="i", local_directory=True)
    kept = task_dir(tmp_path, "t", meta, completed=ago(20))
    (kept / "workdir" / "node_modules").mkdir()
    lookup = FakeLookup(issue_states={"i": ParentState(True, "done", ago(100))})
    collector(tmp_path, lookup).run_round()
    assert (kept / "workdir" / "main.py").exists()
    assert not (kept / "workdir" / "node_modules").exists()


def test_dot_directories_and_the_emptied_workspace(tmp_path: Path) -> None:
    """The skill cache is never walked; a workspace dir left empty is removed."""
    cache = tmp_path / ".skill-cache" / "v1" / "ws" / "x"
    cache.mkdir(parents=True)
    age_dir(cache, 1000)
    age_dir(cache.parent, 1000)
    gone = task_dir(tmp_path, "t")
    age_dir(gone, 80)
    collector(tmp_path, FakeLookup()).run_round()
    assert cache.exists()
    assert not (tmp_path / WS).exists()


def test_a_missing_root_is_an_empty_round(tmp_path: Path) -> None:
    """Before the first task there is no root: nothing to do, no error."""
    stats = collector(tmp_path / "none", FakeLookup()).run_round()
    assert stats.cleaned == stats.orphaned == stats.skipped == 0


def test_both_layouts_are_collected_alike(tmp_path: Path) -> None:
    """A directory named after the whole task id (earlier versions) and one named after its
    last 12 hex digits (Go's, and ours now) go by their meta alike, side by side."""
    full = task_dir(tmp_path, "0190f5e2-aaaa-7000-8000-0123456789ab", _issue("i-done"))
    key = task_dir(
        tmp_path, task_dir_name("0190f5e2-aaaa-7000-8000-ba9876543210"), _issue("i-done")
    )
    kept = task_dir(tmp_path, task_dir_name("0190f5e2-aaaa-7000-8000-000000000001"), _issue("i"))
    assert key.name == "ba9876543210"
    lookup = FakeLookup(
        issue_states={
            "i-done": ParentState(True, "done", ago(30)),
            "i": ParentState(True, "in_progress", ago(30)),
        }
    )
    collector(tmp_path, lookup).run_round()
    assert not full.exists() and not key.exists() and kept.exists()
