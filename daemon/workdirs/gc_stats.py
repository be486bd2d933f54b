"""What one GC round did: the tally both halves of a round add to, the task directories
(gc.py) and the repository caches (repo_gc.py), and the round's summary line.

Its own module so that neither half imports the other for it: repo_gc.py took it from gc.py,
which runs repo_gc.py's janitor, and the two imported each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GcStats:
    """What one round did."""

    cleaned: int = 0
    orphaned: int = 0
    skipped: int = 0
    artifact_dirs: int = 0
    artifact_removed: int = 0
    worktrees_pruned: int = 0
    branches_deleted: int = 0
    repo_caches_reclaimed: int = 0
    bytes_reclaimed: int = 0
    by_pattern: dict[str, int] = field(default_factory=dict)

    def line(self) -> str:
        """The round's summary log line."""
        return (
            f"gc: round done: {self.cleaned} cleaned, {self.orphaned} orphaned, "
            f"{self.skipped} kept, {self.artifact_removed} artifact dirs in {self.artifact_dirs} "
            f"tasks, {self.branches_deleted} agent branches, {self.repo_caches_reclaimed} repo "
            f"caches, {self.bytes_reclaimed} bytes reclaimed"
        )
