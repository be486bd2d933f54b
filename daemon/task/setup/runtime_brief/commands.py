"""The `multica` commands the brief teaches: the full set for runs that may touch issues,
the one command of a quick-create run, and how a comment body reaches the CLI."""

from __future__ import annotations

from daemon.protocol.models import Task
from daemon.task.setup.runtime_brief.statuses import status_command

# A run that merged the two streams read a write's confirmation as failed JSON and retried
# it: a duplicate comment or issue.
_STREAMS = (
    "With `--output json` the JSON goes to stdout and confirmations and warnings to stderr;"
    " never merge them (`2>&1`) into anything that parses the output, or a write that worked"
    " looks failed and gets repeated.\n\n"
)

_FULL_HEAD = (
    "## Commands\n\n"
    "Ask for `--output json` when you read data. Only the everyday issue commands are listed"
    " here; `multica --help` and `multica <command> --help` show the rest.\n\n"
    + _STREAMS
    + "- `multica issue get <id> --output json`: the whole issue, its `metadata` included.\n"
    "- `multica issue comment list <issue-id> --output json`: the discussion, thread by"
    " thread. For a wide view use `--roots-only --summary` (each thread's root with its"
    " `reply_count` and `last_activity_at`); to read one thread deeply, `--thread"
    " <comment-id> --tail N`; `--compact` trims any JSON read; `--since <RFC3339>` only what"
    " is newer. `--recent N` counts threads, not comments, so on a small issue it returns"
    " the whole history.\n"
    '- `multica issue create --title "..." [--description-file <path>] [--priority X]'
    " [--status X] [--assignee X | --assignee-id <uuid>] [--parent <issue-id>] [--stage N]"
    " [--project <project-id>] [--due-date <YYYY-MM-DD>] [--attachment <path>]`: a new"
    " issue. Put a long description in a file inside your working directory (such as"
    " `./description.md`, never `/tmp` or another shared place) and pass"
    " `--description-file`: flags after a heredoc can be swallowed.\n"
    "- `multica issue update <id> [--title X] [--description-file <path>] [--priority X]"
    " [--status X] [--assignee X] [--parent <issue-id>] [--stage N] [--project <project-id>]"
    ' [--due-date <YYYY-MM-DD>] [--no-start]`: change fields; `--parent ""` removes the'
    " parent.\n"
    "- `multica issue assign <id> (--to X | --to-id <uuid> | --unassign) [--no-start]`:"
    " change who owns it. Assigning starts a run for the new owner; when the change only"
    " records ownership or progress of work already under way, add `--no-start` (it works"
    " on `assign`, `update` and `status` alike).\n"
)

_FULL_TAIL = (
    "- `multica issue children <id> --output json`: a parent's sub-issues, grouped by"
    " stage.\n"
    '- `multica issue comment add <issue-id> (--content-file <path> | --content "..." |'
    " --content-stdin) [--parent <comment-id>] [--attachment <path>]`: post a comment; what"
    ' you write yourself always goes through `--content-file` (see "Comment Formatting").'
    " `multica issue comment add --help` has every flag.\n"
    "- `multica issue metadata list <issue-id>`, `multica issue metadata set <issue-id>"
    " --key <k> --value <v> [--type string|number|bool]`, `multica issue metadata delete"
    " <issue-id> --key <k>`: the issue's key-value metadata.\n"
    "- `multica repo checkout <url> [--ref <branch-or-sha>]`: a repository, checked out on a"
    " branch of its own.\n\n"
)


def full(task: Task) -> str:
    """Every command of a run that may touch issues, with this workspace's statuses."""
    return _FULL_HEAD + status_command(task) + _FULL_TAIL


SQUAD = (
    "### Squad upkeep\n\n"
    "- `multica squad member set-role <squad-id> --member-id <id> --member-type"
    " <agent|member> --role <role>`: change a member's role in place, rather than removing"
    " and adding it again.\n\n"
)

QUICK_CREATE = (
    "## Commands\n\n"
    "Ask for `--output json`. This task needs one command; `multica <command> --help`"
    " describes any other.\n\n"
    + _STREAMS
    + '- `multica issue create --title "..." [--description "..." | --description-file'
    " <path> | --description-stdin] [--priority X] [--status X] [--assignee X |"
    " --assignee-id <uuid>] [--parent <issue-id>] [--stage N] [--project <project-id>]"
    " [--due-date <YYYY-MM-DD>] [--attachment <path>] --output json`: the new issue;"
    " `--attachment` may be repeated. Prefer `--description-file` for a long description"
    " (flags after a heredoc can be swallowed), written inside your working directory, never"
    " `/tmp`:"
    " the CLI refuses a file outside it, so stop if writing the file fails.\n"
    "- `multica workspace member list`, `multica agent list`, `multica squad list`: to"
    " resolve an assignee the user named.\n\n"
)

# Inline bodies lost their newlines and quotes, heredocs swallowed the flags after them, and
# files under /tmp leaked between runs: hence a file of the run's own.
COMMENT_BODIES = (
    "## Comment Formatting\n\n"
    "Write every comment body to a UTF-8 file in your working directory with your"
    " file-writing tool (never `/tmp` or another shared place), post it with"
    " `--content-file <path>`, then delete the file (`rm ./reply.md`). Do not post what you"
    " wrote with `--content`, do not pipe a heredoc through `--content-stdin` next to other"
    " flags, and do not count on `\\n` escapes. A reply keeps the `--parent` of the comment"
    " it answers.\n\n"
)
