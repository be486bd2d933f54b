"""A project's local directory: the user's own folder a task works in, as Multica's daemon
does it.

A project may carry a `local_directory` resource per machine (`resource_ref`: `local_path`,
`daemon_id`, `label`, `execution_mode`); a daemon acts on the one bound to its own daemon id.
`in_place` (or no mode) makes the user's folder the agent's work dir, one task at a time per
real path; `worktree` gives each task a git worktree of the folder's repository in the task's
own directory, with the folder's uncommitted state, and delivers the work as a branch.

    resource.py    which resource is ours, its mode, and the checks of its path
    locks.py       one task at a time per real path, and the wait the server is told of
    brief_block.py the brief as a marked block in the user's own CLAUDE.md / AGENTS.md
    sidecars.py    what the daemon writes into the folder, and its exact rollback
    worktree.py    the worktree mode: snapshot, branch, commit, removal
    untracked.py   the user's untracked files replayed into the worktree
    place.py       the task's place with a local directory, from preparation to delivery
    hold.py        a run's side: found, waited for (the server told), settled
"""
