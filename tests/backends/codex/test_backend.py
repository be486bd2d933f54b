"""How the Codex backend builds its command line and finds a thread's earlier usage."""

from __future__ import annotations

import json
import os
import threading
import tomllib
from pathlib import Path

from backends.base import RunSpec
from backends.codex.backend import CodexBackend, codex_home, configured_model
from backends.codex.rollouts import rollout_present, rollout_totals


def spec(**fields: object) -> RunSpec:
    base: dict[str, object] = {"prompt": "hi", "workdir": Path("/w"), "env": {"PATH": "/bin"}}
    base.update(fields)
    return RunSpec(**base)  # type: ignore[arg-type]


def token_count(total_input: int) -> str:
    """One rollout line as the CLI (0.169.0) writes it after each model request."""
    usage = {
        "input_tokens": total_input,
        "cached_input_tokens": 10,
        "cache_write_input_tokens": 0,
        "output_tokens": 7,
        "reasoning_output_tokens": 1,
        "total_tokens": total_input + 7,
    }
    payload = {"type": "token_count", "info": {"total_token_usage": usage}}
    return json.dumps({"type": "event_msg", "payload": payload})


def test_argv_runs_exec_with_json_unsandboxed_and_reads_the_prompt_from_stdin() -> None:
    """The fixed flags come first and the prompt argument is `-` (stdin)."""
    assert CodexBackend("/opt/codex").argv(spec()) == [
        "/opt/codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "-",
    ]


def test_resume_comes_after_every_exec_option() -> None:
    """`resume THREAD` follows the exec options (configured and task arguments) and precedes `-`."""
    backend = CodexBackend("codex", ["--json", "-c", "a=1"], model="gpt-x")
    argv = backend.argv(spec(extra_args=["--oss"]), resume="t-1")
    assert argv[5:] == ["--model", "gpt-x", "-c", "a=1", "--oss", "resume", "t-1", "-"]


def test_instructions_are_a_valid_toml_string() -> None:
    """Instructions with quotes, newlines, backslashes and non-ASCII survive as a TOML value."""
    text = 'Say "hi"\n\tthen C:\\path — ok \x01'
    argv = CodexBackend("codex").argv(spec(instructions=text))
    key_value = argv[argv.index("-c") + 1]
    assert tomllib.loads(key_value) == {"developer_instructions": text}


def test_session_markers_are_stripped() -> None:
    """Variables a running Codex sets for its children never reach the agent."""
    env = {"PATH": "/bin", "CODEX_THREAD_ID": "t", "CODEX_SESSION_ID": "s", "CODEX_HOME": "/c"}
    assert CodexBackend("codex").env(spec(env=env)) == {"PATH": "/bin", "CODEX_HOME": "/c"}


def test_codex_home_defaults_under_home() -> None:
    """CODEX_HOME wins; otherwise the CLI's default under HOME."""
    assert codex_home({"CODEX_HOME": "/c", "HOME": "/h"}) == Path("/c")
    assert codex_home({"HOME": "/h"}) == Path("/h/.codex")


def test_rollout_totals_are_the_last_token_count(tmp_path: Path) -> None:
    """The thread's usage so far is the last token count in its rollout file."""
    folder = tmp_path / "sessions" / "2026" / "11" / "25"
    folder.mkdir(parents=True)
    lines = ['{"type": "session_meta"}', token_count(200), "not json", token_count(400)]
    (folder / "rollout-2026-11-25T22-04-00-thread-1.jsonl").write_text("\n".join(lines) + "\n")
    assert rollout_totals(tmp_path, "thread-1") == {
        "input_tokens": 400,
        "cached_input_tokens": 10,
        "cache_write_input_tokens": 0,
        "output_tokens": 7,
    }


def test_rollout_totals_of_an_unknown_thread_are_empty(tmp_path: Path) -> None:
    """No rollout file means no baseline (and no error)."""
    assert rollout_totals(tmp_path, "nope") == {}
    assert rollout_totals(tmp_path / "missing", "nope") == {}


def test_configured_model_comes_from_the_cli_config(tmp_path: Path) -> None:
    """Usage names the config's model when none is configured here; a fallback otherwise."""
    assert configured_model(tmp_path) == "codex-default"
    (tmp_path / "config.toml").write_text('model = "gpt-9"\n')
    assert configured_model(tmp_path) == "gpt-9"
    (tmp_path / "config.toml").write_text("model = [broken\n")
    assert configured_model(tmp_path) == "codex-default"


def test_relative_cli_path_is_made_absolute() -> None:
    """A relative path is resolved now, not later inside the task's work directory."""
    assert CodexBackend("bin/codex").path == str(Path.cwd() / "bin" / "codex")
    assert CodexBackend("codex").path == "codex"


def test_a_thread_is_resumable_once_its_rollout_exists(tmp_path: Path) -> None:
    """Flat or dated, plain or compressed: the rollout names the thread; another does not."""
    sessions = tmp_path / "sessions"
    assert not rollout_present(tmp_path, "th-1")
    dated = sessions / "2026" / "11" / "26"
    dated.mkdir(parents=True)
    (dated / "rollout-2026-11-26T10-00-00-th-1.jsonl").write_text("{}")
    (sessions / "rollout-2026-11-26T10-00-00-th-2.jsonl.zst").write_bytes(b"")
    assert rollout_present(tmp_path, "th-1") and rollout_present(tmp_path, "th-2")
    assert not rollout_present(tmp_path, "th-3") and not rollout_present(tmp_path, "")


def test_an_agents_config_fifo_or_link_is_no_model(tmp_path: Path) -> None:
    """At an attempt's start the task's Codex home is the agent's: a FIFO `config.toml` is not
    waited on, and with an agent user a link is not followed (the fallback model instead)."""
    secret = tmp_path / "secret.toml"
    secret.write_text('model = "root-only"\n')
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").symlink_to(secret)
    assert configured_model(home, (os.getuid(), os.getgid())) == "codex-default"
    (home / "config.toml").unlink()
    os.mkfifo(home / "config.toml")
    done: list[str] = []
    reading = threading.Thread(target=lambda: done.append(configured_model(home)), daemon=True)
    reading.start()
    reading.join(10.0)  # a safety net: the read is refused at once
    try:
        assert done == ["codex-default"]
    finally:
        if reading.is_alive():  # a writer that opens and closes lets the blocked read end
            os.close(os.open(home / "config.toml", os.O_WRONLY | os.O_NONBLOCK))
