"""The task's Codex config: the user's, its shell policy replaced, memory and sub-agents off."""

from __future__ import annotations

import tomllib
from typing import Any

import pytest

from daemon.errors import AgentSetupError
from daemon.task.setup.codex_config import shell_names, task_config

USER = """\
# my settings
model = "gpt-5"  # the [fast] one
notes = \"\"\"a [bracket] and a # hash
and \\"\"\" quotes\"\"\"

[shell_environment_policy]
ignore_default_excludes = false
exclude = [
  "AWS_*",  # keep out
]

[shell_environment_policy.set]
PATH = "/bin"

[features]
web_search = true
multi_agent = true

[memories]
use_memories = true
max_items = 3

[[skills.config]]
name = "superpowers:brainstorming"
# a comment inside the entry

[[skills.config]]
path = "/x"

[profiles.fast]
model = "gpt-5-mini"
shell_environment_policy = { inherit = "none" }

[model_providers.fake]
base_url = "http://127.0.0.1:1/v1"
"""


def _parsed(text: str) -> dict[str, Any]:
    return tomllib.loads(text)


def test_the_users_policy_gives_way_to_the_tasks() -> None:
    """Every policy of the user's (root, set table, a profile's) goes; the task's lets the
    named variables through, the default filter off."""
    config = _parsed(task_config(USER, ["MULTICA_TOKEN", "PATH"]))
    assert config["shell_environment_policy"] == {
        "inherit": "all",
        "ignore_default_excludes": True,
        "include_only": ["MULTICA_TOKEN", "PATH"],
    }
    assert config["profiles"]["fast"] == {"model": "gpt-5-mini"}


def test_a_dotted_policy_at_the_root_goes_too() -> None:
    """`shell_environment_policy.<key> = ...` at the root is the same policy."""
    config = _parsed(task_config('shell_environment_policy.inherit = "core"\n', ["HOME"]))
    assert config["shell_environment_policy"]["inherit"] == "all"


def test_memory_and_sub_agents_are_off_in_the_users_own_tables() -> None:
    """Inside the user's `[features]` and `[memories]`, beside what else they hold."""
    config = _parsed(task_config(USER, []))
    assert config["features"] == {"web_search": True, "multi_agent": False, "memories": False}
    assert config["memories"] == {
        "max_items": 3,
        "generate_memories": False,
        "use_memories": False,
    }


def test_skill_entries_go_and_everything_else_stays_as_written() -> None:
    """`[[skills.config]]` entries are gone; comments, strings with brackets and hashes, and
    the other tables are kept byte for byte."""
    text = task_config(USER, [])
    config = _parsed(text)
    assert "skills" not in config
    assert config["model"] == "gpt-5" and config["notes"].startswith("a [bracket] and a # hash")
    assert config["model_providers"]["fake"]["base_url"] == "http://127.0.0.1:1/v1"
    assert '# my settings\nmodel = "gpt-5"  # the [fast] one\n' in text
    assert "a comment inside the entry" not in text


def test_an_empty_config_gets_the_settings_at_its_root() -> None:
    """No user config: the four switches as dotted keys, then the policy."""
    assert _parsed(task_config("", ["HOME"])) == {
        "features": {"multi_agent": False, "memories": False},
        "memories": {"generate_memories": False, "use_memories": False},
        "shell_environment_policy": {
            "inherit": "all",
            "ignore_default_excludes": True,
            "include_only": ["HOME"],
        },
    }


def test_a_config_codex_would_refuse_is_left_for_codex_to_say_so() -> None:
    """Not TOML: copied as it is, nothing added."""
    assert task_config("model = [", ["HOME"]) == "model = ["


def test_a_layout_that_cannot_take_the_settings_fails_the_task() -> None:
    """`features` as an inline table cannot grow a key: the task fails saying why."""
    with pytest.raises(AgentSetupError, match="would not be valid TOML"):
        task_config("features = { web_search = true }\n", [])


def test_shell_names_keep_the_tasks_own_and_drop_inherited_credentials() -> None:
    """The task's MULTICA_TOKEN and a custom_env key pass; the daemon's credentials and
    MULTICA_* do not; names are unique without case."""
    inherited = {
        "PATH": "/bin",
        "GITHUB_TOKEN": "daemon's",
        "MULTICA_DAEMON_TOKEN": "daemon's",
        "Path": "/bin",
    }
    env = {
        **inherited,
        "MULTICA_TOKEN": "mat_x",
        "MULTICA_TASK_ID": "t",
        "OPENAI_API_KEY": "agent's",
        "TMPDIR": "/tmp/t",
    }
    names = shell_names(env, inherited, {"OPENAI_API_KEY": "agent's"})
    assert names == ["MULTICA_TASK_ID", "MULTICA_TOKEN", "OPENAI_API_KEY", "Path", "TMPDIR"]
