"""Settings come from the environment in one place; bad values stop start-up clearly."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from daemon.config import AgentCliSettings, Settings, normalize_server_url
from daemon.errors import ConfigError


def test_defaults_match_the_documented_values(tmp_path: Path) -> None:
    """With an empty environment every setting takes its documented default."""
    s = Settings.from_env({"HOME": str(tmp_path)})
    assert s.server_url == "" and s.embedded
    assert (s.poll_interval, s.heartbeat_interval, s.shutdown_grace) == (30, 15, 30)
    assert (s.idle_watchdog, s.tool_watchdog) == (1800, 7200)
    assert (s.first_output_timeout, s.exit_grace, s.agent_timeout) == (120, 10, 0)
    assert s.max_concurrent_tasks == 20
    assert s.state_dir == tmp_path / ".local" / "state" / "agent-daemon"
    assert s.workspaces_root == tmp_path / "multica_workspaces"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("ws://localhost:8080/ws", "http://localhost:8080"),
        ("wss://multica.example.com/ws", "https://multica.example.com"),
        ("https://multica.example.com/", "https://multica.example.com"),
        ("http://host:9000/api/ws/", "http://host:9000/api/ws"),
    ],
)
def test_server_url_is_normalised(raw: str, expected: str) -> None:
    """ws→http, wss→https, a bare `/ws` path dropped, a trailing slash trimmed."""
    assert normalize_server_url(raw) == expected


@pytest.mark.parametrize(
    ("var", "value", "seconds"),
    [
        ("MULTICA_AGENT_IDLE_WATCHDOG", "300ms", 0.3),
        ("MULTICA_AGENT_IDLE_WATCHDOG", "1.5h", 5400),
        ("MULTICA_AGENT_TOOL_WATCHDOG", "2h45m", 9900),
        ("MULTICA_AGENT_IDLE_WATCHDOG", "0", 0),
        ("MULTICA_DAEMON_SHUTDOWN_GRACE", "1d", 86400),
    ],
)
def test_go_durations(tmp_path: Path, var: str, value: str, seconds: float) -> None:
    """Durations accept Go syntax plus a `d` suffix."""
    s = Settings.from_env({"HOME": str(tmp_path), var: value})
    field = {
        "MULTICA_AGENT_IDLE_WATCHDOG": "idle_watchdog",
        "MULTICA_AGENT_TOOL_WATCHDOG": "tool_watchdog",
        "MULTICA_DAEMON_SHUTDOWN_GRACE": "shutdown_grace",
    }[var]
    assert getattr(s, field) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("MULTICA_AGENT_IDLE_WATCHDOG", "30"),
        ("MULTICA_DAEMON_POLL_INTERVAL", "-5s"),
        ("MULTICA_DAEMON_MAX_CONCURRENT_TASKS", "0"),
        ("MULTICA_SERVER_URL", "ftp://x"),
        ("MULTICA_DAEMON_HEALTH_ADDR", "nope"),
        ("MULTICA_DAEMON_LOG_FORMAT", "xml"),
        ("MULTICA_CODEX_MODE", "rpc"),
    ],
)
def test_bad_value_names_the_variable(tmp_path: Path, var: str, value: str) -> None:
    """A bad value raises ConfigError naming the variable and the value."""
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"HOME": str(tmp_path), var: value})
    assert var in str(caught.value) and repr(value) in str(caught.value)


def test_token_falls_back_to_the_multica_config_file(tmp_path: Path) -> None:
    """Without MULTICA_DAEMON_TOKEN the `token` of ~/.multica/config.json is used, unshown."""
    (tmp_path / ".multica").mkdir()
    (tmp_path / ".multica" / "config.json").write_text(json.dumps({"token": "sekrit"}))
    s = Settings.from_env({"HOME": str(tmp_path)})
    assert s.token == "sekrit"
    assert "sekrit" not in repr(s)
    s = Settings.from_env({"HOME": str(tmp_path), "MULTICA_DAEMON_TOKEN": "env-token"})
    assert s.token == "env-token"


def test_bad_value_exits_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    """The CLI prints one line naming the variable, the value and the syntax, and exits 2."""
    proc = subprocess.run(
        [sys.executable, "-m", "daemon", "run"],
        env={"HOME": str(tmp_path), "MULTICA_AGENT_IDLE_WATCHDOG": "5 minutes"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "MULTICA_AGENT_IDLE_WATCHDOG='5 minutes'" in lines[0]
    assert "Go duration" in lines[0] and "Traceback" not in proc.stderr


def _login(home: Path, fields: dict[str, str], profile: str = "") -> Path:
    folder = home / ".multica" / ("profiles/" + profile if profile else "")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(fields))
    return folder / "config.json"


LOGIN = {
    "server_url": "wss://multica.example.test/ws",
    "token": "mul_login",
    "device_name": "laptop",
    "workspaces_root": "~/mw",
}


def test_unset_settings_come_from_the_multica_login(tmp_path: Path) -> None:
    """Server URL, token, device name and workspaces root come from config.json when unset."""
    path = _login(tmp_path, LOGIN)
    s = Settings.from_env({"HOME": str(tmp_path)})
    assert (s.server_url, s.token, s.device_name) == (
        "https://multica.example.test",
        "mul_login",
        "laptop",
    )
    assert s.workspaces_root == Path("~/mw").expanduser()
    assert s.token_source == str(path)
    assert not s.embedded


def test_the_environment_wins_over_the_multica_login(tmp_path: Path) -> None:
    """A variable that is set beats the file's field."""
    _login(tmp_path, LOGIN)
    env = {
        "HOME": str(tmp_path),
        "MULTICA_SERVER_URL": "http://other.test",
        "MULTICA_DAEMON_DEVICE_NAME": "box",
        "MULTICA_WORKSPACES_ROOT": str(tmp_path / "w"),
    }
    s = Settings.from_env(env)
    assert (s.server_url, s.device_name, s.workspaces_root) == (
        "http://other.test",
        "box",
        tmp_path / "w",
    )
    assert s.token == "mul_login"


def test_an_empty_server_url_keeps_the_embedded_server(tmp_path: Path) -> None:
    """MULTICA_SERVER_URL set empty means the embedded server, whatever config.json says."""
    _login(tmp_path, LOGIN)
    assert Settings.from_env({"HOME": str(tmp_path), "MULTICA_SERVER_URL": ""}).embedded


def test_a_login_token_never_becomes_the_embedded_servers(tmp_path: Path) -> None:
    """The embedded server gets only MULTICA_DAEMON_TOKEN, never config.json's login token."""
    _login(tmp_path, {"token": "mul_login"})
    s = Settings.from_env({"HOME": str(tmp_path)})
    assert (s.embedded, s.token, s.embedded_token) == (True, "mul_login", "")
    s = Settings.from_env({"HOME": str(tmp_path), "MULTICA_DAEMON_TOKEN": "chosen"})
    assert (s.token, s.embedded_token, s.token_source) == (
        "chosen",
        "chosen",
        "MULTICA_DAEMON_TOKEN",
    )


def test_a_profile_reads_its_own_login_and_workspaces_root(tmp_path: Path) -> None:
    """MULTICA_PROFILE=x reads ~/.multica/profiles/x/ and works in ~/multica_workspaces_x."""
    _login(tmp_path, LOGIN)
    _login(tmp_path, {"server_url": "https://staging.test", "token": "mul_x"}, profile="x")
    s = Settings.from_env({"HOME": str(tmp_path), "MULTICA_PROFILE": "x"})
    assert (s.profile, s.server_url, s.token) == ("x", "https://staging.test", "mul_x")
    assert s.workspaces_root == tmp_path / "multica_workspaces_x"


def test_a_bad_login_server_url_names_the_file(tmp_path: Path) -> None:
    """A server_url in config.json that is no URL stops start-up naming the file."""
    path = _login(tmp_path, {"server_url": "ftp://nope"})
    with pytest.raises(ConfigError, match=re.escape(str(path))):
        Settings.from_env({"HOME": str(tmp_path)})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, {"opencode": 600, "gemini": 1800, "claude": 1800, "scripted": 1800}),
        ({"MULTICA_AGENT_IDLE_WATCHDOG": "4s"}, {"opencode": 4, "gemini": 4}),
        ({"MULTICA_GEMINI_IDLE_WATCHDOG": "5m"}, {"gemini": 300, "codex": 1800}),
        ({"MULTICA_OPENCODE_IDLE_WATCHDOG": "0"}, {"opencode": 1800}),
        ({"MULTICA_OPENCODE_IDLE_WATCHDOG": "2h"}, {"opencode": 1800}),
        ({"MULTICA_AGENT_IDLE_WATCHDOG": "0"}, {"opencode": 0, "gemini": 0}),
    ],
)
def test_backend_idle_window_narrows_the_global_one(
    tmp_path: Path, env: dict[str, str], expected: dict[str, float]
) -> None:
    """A backend's own window only narrows the global one; its 0 is the global, global 0 off."""
    s = Settings.from_env({"HOME": str(tmp_path), **env})
    assert {name: s.idle_window(name) for name in expected} == expected


def test_an_agent_clis_variables_make_its_settings(tmp_path: Path) -> None:
    """MULTICA_<NAME>_PATH, _ARGS, _MODEL and _IDLE_WATCHDOG set that CLI's settings alone."""
    env = {
        "HOME": str(tmp_path),
        "MULTICA_GEMINI_PATH": "/opt/gemini",
        "MULTICA_GEMINI_ARGS": "--sandbox 'a b'",
        "MULTICA_GEMINI_MODEL": "gemini-pro",
        "MULTICA_GEMINI_IDLE_WATCHDOG": "5m",
    }
    s = Settings.from_env(env)
    assert s.agent_cli("gemini") == AgentCliSettings(
        "/opt/gemini", ("--sandbox", "a b"), "gemini-pro", 300
    )
    assert s.opencode == AgentCliSettings("opencode", (), "", 600)
    assert (s.claude.path, s.codex.path, s.hermes.path) == ("claude", "codex", "hermes")
