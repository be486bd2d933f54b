"""Where tasks work on code: repository caches, a worktree per task, the checkout route."""
