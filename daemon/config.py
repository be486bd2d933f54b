"""The daemon's settings: one frozen model, built from the environment in one place.

Nothing else in the daemon reads `os.environ` for its own settings. Each field is declared
once: its type names its kind (how the text is parsed, what an error asks for) and `_env`
its variable, default and description. An agent CLI's settings are one field each
(`_agent_cli`), read from four variables declared once for every CLI (`_cli_variables`).
The configuration table (docs/configuration.md) and deploy/systemd/agent-daemon.env are
checked against (or generated from) them.
"""

from __future__ import annotations

import os
import shlex
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NamedTuple
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

from backends.process.identity import AgentUser
from daemon.addresses import split_host_port
from daemon.boundary.pool import resolve_pool as resolve_agent_pool
from daemon.errors import ConfigError
from daemon.multica_home import default_workspaces_root, fill_from_config, profile_dir
from daemon.times import SYNTAX as DURATION_SYNTAX
from daemon.times import parse_duration

EMBEDDED_LISTEN = "127.0.0.1:8080"


def _positive_int(raw: str) -> int:
    value = int(raw.strip())
    if value < 1:
        raise ValueError(raw)
    return value


def _count(raw: str) -> int:
    value = int(raw.strip())
    if value < 0:
        raise ValueError(raw)
    return value


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def _size(raw: str) -> int:
    # Bytes, or a number with K, M, G or T (binary units, an optional trailing B or iB, as
    # systemd's MemoryMax= reads them); 0 or `max` = no limit.
    text = raw.strip().lower().removesuffix("ib").removesuffix("b")
    if text in ("max", "infinity"):
        return 0
    unit = text[-1:] if text[-1:].isalpha() else ""
    number = float(text[: len(text) - len(unit)] or "x")
    if unit not in _SIZE_UNITS or number < 0:
        raise ValueError(raw)
    return int(number * _SIZE_UNITS[unit])


def _pids(raw: str) -> int:
    return 0 if raw.strip().lower() == "max" else _count(raw)


def _weight(raw: str) -> int:
    value = int(raw.strip())
    if not 1 <= value <= 10_000:
        raise ValueError(raw)
    return value


def _words(raw: str) -> tuple[str, ...]:
    return tuple(shlex.split(raw))


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(raw)


def _patterns(raw: str) -> tuple[str, ...]:
    # As Go: comma-separated directory names; an entry with a path separator is dropped (the
    # cleanup matches names, never paths).
    parts = (p.strip() for p in raw.split(","))
    return tuple(p for p in parts if p and "/" not in p and "\\" not in p)


def _origins(raw: str) -> tuple[str, ...]:
    # Exact origins, compared as written: `scheme://host[:port]`, nothing after.
    found = tuple(p.strip() for p in raw.split(",") if p.strip())
    for origin in found:
        scheme, _, rest = origin.partition("://")
        if scheme not in ("http", "https") or not rest or "/" in rest or "@" in rest:
            raise ValueError(origin)
    return found


def _address(raw: str) -> str:
    split_host_port(raw)
    return raw.strip()


def _path(raw: str) -> Path:
    return Path(raw).expanduser()


def _text(raw: str) -> str:
    return raw.strip()


def _log_format(raw: str) -> str:
    value = raw.strip().lower()
    if value not in ("text", "json"):
        raise ValueError(raw)
    return value


def _codex_mode(raw: str) -> str:
    value = raw.strip().lower()
    if value not in ("exec", "app-server"):
        raise ValueError(raw)
    return value


def _level(raw: str) -> str:
    value = raw.strip().upper()
    if value not in ("DEBUG", "INFO", "WARNING", "WARN", "ERROR"):
        raise ValueError(raw)
    return "WARNING" if value == "WARN" else value


def normalize_server_url(raw: str) -> str:
    """ws→http, wss→https, a path of exactly `/ws` dropped, a trailing `/` trimmed."""
    if not raw.strip():
        return ""
    parts = urlsplit(raw.strip())
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    if scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(raw)
    path = "" if parts.path == "/ws" else parts.path.rstrip("/")
    return urlunsplit((scheme, parts.netloc, path, parts.query, ""))


@dataclass(frozen=True, slots=True)
class Kind:
    """How a setting's text becomes its value, and the syntax an error message asks for."""

    convert: Callable[[str], Any]
    syntax: str


TEXT = Kind(_text, "text")
DURATION = Kind(parse_duration, DURATION_SYNTAX)
URL = Kind(normalize_server_url, "an http, https, ws or wss URL")
PATH = Kind(_path, "a path")
POSITIVE = Kind(_positive_int, "a whole number of at least 1")
COUNT = Kind(_count, "a whole number of at least 0")
ADDRESS = Kind(_address, "host:port")
WORDS = Kind(_words, "shell words")
FLAG = Kind(_flag, "1 or 0")
PATTERNS = Kind(_patterns, "comma-separated directory names")
ORIGINS = Kind(_origins, "comma-separated origins (http[s]://host[:port])")
LOG_FORMAT = Kind(_log_format, "text or json")
CODEX_MODE = Kind(_codex_mode, "exec or app-server")
LEVEL = Kind(_level, "DEBUG, INFO, WARNING or ERROR")
SIZE = Kind(_size, "a size in bytes, or with K, M, G or T (e.g. 4G); 0 or max = no limit")
PIDS = Kind(_pids, "a whole number of at least 0, or max (0 and max = no limit)")
WEIGHT = Kind(_weight, "a whole number from 1 to 10000")


Url = Annotated[str, URL]
PathSetting = Annotated[Path, PATH]
Duration = Annotated[float, DURATION]
Positive = Annotated[int, POSITIVE]
Count = Annotated[int, COUNT]
Address = Annotated[str, ADDRESS]
Words = Annotated[tuple[str, ...], WORDS]
Flag = Annotated[bool, FLAG]
Patterns = Annotated[tuple[str, ...], PATTERNS]
Origins = Annotated[tuple[str, ...], ORIGINS]
LogFormat = Annotated[str, LOG_FORMAT]
CodexMode = Annotated[str, CODEX_MODE]
Level = Annotated[str, LEVEL]
Size = Annotated[int, SIZE]
Pids = Annotated[int, PIDS]
Weight = Annotated[int, WEIGHT]
"""A setting's type names its kind; a plain `str` is TEXT."""


def _env(var: str, default: str, doc: str, *, secret: bool = False) -> Any:
    """A field read from `var`; `default` is its value as text, parsed like a value set."""
    extra: dict[str, Any] = {"env": var, "env_default": default}
    return Field(description=doc, repr=not secret, json_schema_extra=extra)


def _derived(doc: str, default: Any) -> Any:
    """A field `from_env` works out from other values (not a variable of its own)."""
    return Field(default=default, description=doc, json_schema_extra={"derived": True})


@dataclass(frozen=True, slots=True)
class Variable:
    """One environment variable: the value it sets, its default as text, its description
    and how its text is read."""

    key: str
    """The settings field it sets, or an agent CLI's part of one (`claude_path`)."""
    var: str
    default: str
    doc: str
    kind: Kind


class AgentCliSettings(NamedTuple):
    """One agent CLI's configured executable, extra arguments, default model and idle window."""

    path: str
    args: tuple[str, ...]
    model: str
    idle_watchdog: float
    """Its own idle window in seconds; 0 = the global one (see `Settings.idle_window`)."""


def _agent_cli(label: str, *, models: str = "", idle: str = "0", command: str = "") -> Any:
    """A field holding one agent CLI's settings (`AgentCliSettings`), read from the four
    variables `_cli_variables` declares after the field's name (the backend's). `label` is the
    CLI's name for people, `models` whose models it runs (default: `label`), `idle` the default
    of its own idle window, `command` its executable when not named as the backend."""
    extra: dict[str, Any] = {
        "agent_cli": label,
        "models": models or label,
        "idle": idle,
        "command": command,
    }
    return Field(description=f"{label}'s settings", json_schema_extra=extra)


def _cli_variables(
    name: str, label: str, models: str, idle: str, command: str = ""
) -> list[Variable]:
    """`MULTICA_<NAME>_PATH`, `_ARGS`, `_MODEL` and `_IDLE_WATCHDOG`, in the order of
    `AgentCliSettings`; each sets its part of the field `name` (through `<name>_<part>`)."""
    var = f"MULTICA_{name.upper()}"
    # A backend's own 0 means the global window: the description says so where 0 is the default.
    window = f"{label}'s idle window (see Agent backends)"
    if idle == "0":
        window += "; 0 = the global"
    return [
        Variable(f"{name}_path", f"{var}_PATH", command or name, f"{label} executable", TEXT),
        Variable(f"{name}_args", f"{var}_ARGS", "", f"Extra {label} arguments", WORDS),
        Variable(f"{name}_model", f"{var}_MODEL", "", f"Default {models} model", TEXT),
        Variable(f"{name}_idle_watchdog", f"{var}_IDLE_WATCHDOG", idle, window, DURATION),
    ]


class Settings(BaseModel):
    """Every setting of the daemon; see docs/configuration.md."""

    model_config = ConfigDict(frozen=True)

    server_url: Url = _env(
        "MULTICA_SERVER_URL", "", "Server URL; unset = config.json's or embedded; empty = embedded"
    )
    token: str = _env(
        "MULTICA_DAEMON_TOKEN",
        "~/.multica/config.json",
        "The daemon's token; never logged, never passed to agents",
        secret=True,
    )
    daemon_id: str = _env(
        "MULTICA_DAEMON_ID", "", "Stable daemon id; unset = ~/.multica/daemon.id (made once)"
    )
    profile: str = _env(
        "MULTICA_PROFILE", "", "Multica CLI profile: its config is ~/.multica/profiles/<name>/"
    )
    device_name: str = _env("MULTICA_DAEMON_DEVICE_NAME", "hostname", "Name shown on the server")
    workspaces_root: PathSetting = _env(
        "MULTICA_WORKSPACES_ROOT", "~/multica_workspaces", "Where task work directories go"
    )
    state_dir: PathSetting = _env(
        "MULTICA_DAEMON_STATE_DIR",
        "~/.local/state/agent-daemon",
        "Daemon id, running agents, outbox, timeouts.jsonl",
    )
    poll_interval: Duration = _env("MULTICA_DAEMON_POLL_INTERVAL", "30s", "Claim poll interval")
    heartbeat_interval: Duration = _env(
        "MULTICA_DAEMON_HEARTBEAT_INTERVAL", "15s", "Heartbeat interval per runtime"
    )
    workspace_sync_interval: Duration = _env(
        "MULTICA_DAEMON_WORKSPACE_SYNC_INTERVAL",
        "30m",
        "Workspace re-sync (new ones registered, gone ones dropped; jittered)",
    )
    cli_check_interval: Duration = _env(
        "MULTICA_DAEMON_CLI_CHECK_INTERVAL",
        "1m",
        "How often each agent CLI's executable is looked at (one stat); a changed one is asked "
        "its version again and a new version registered; 0 = never",
    )
    token_renew_interval: Duration = _env(
        "MULTICA_DAEMON_TOKEN_RENEW_INTERVAL", "72h", "How often the login token's renewal is asked"
    )
    status_poll_interval: Duration = _env(
        "MULTICA_DAEMON_STATUS_POLL_INTERVAL", "5s", "How often a running task's status is polled"
    )
    max_concurrent_tasks: Positive = _env(
        "MULTICA_DAEMON_MAX_CONCURRENT_TASKS", "20", "Tasks run at once"
    )
    shutdown_grace: Duration = _env(
        "MULTICA_DAEMON_SHUTDOWN_GRACE", "30s", "Time running tasks get to finish on shutdown"
    )
    health_addr: Address = _env(
        "MULTICA_DAEMON_HEALTH_ADDR", "127.0.0.1:19514", "Health port host:port (port 0 = any)"
    )
    log_format: LogFormat = _env("MULTICA_DAEMON_LOG_FORMAT", "text", "`text` or `json`")
    log_level: Level = _env("LOG_LEVEL", "INFO", "DEBUG, INFO, WARNING or ERROR")
    embedded_listen: Address = _env(
        "MULTICA_EMBEDDED_LISTEN", EMBEDDED_LISTEN, "Embedded server address when no server URL"
    )
    embedded_repos: Words = _env(
        "MULTICA_EMBEDDED_REPOS",
        "",
        "Repository URLs the embedded server's default workspace offers agents (shell words)",
    )
    idle_watchdog: Duration = _env(
        "MULTICA_AGENT_IDLE_WATCHDOG", "30m", "Idle window; 0 disables the watchdog entirely"
    )
    tool_watchdog: Duration = _env(
        "MULTICA_AGENT_TOOL_WATCHDOG", "2h", "Idle budget while a tool call runs; 0 = never"
    )
    first_output_timeout: Duration = _env(
        "MULTICA_AGENT_FIRST_OUTPUT_TIMEOUT", "2m", "No message at all since start; 0 = off"
    )
    exit_grace: Duration = _env(
        "MULTICA_AGENT_EXIT_GRACE", "10s", "Wait for exit after the final result; 0 = off"
    )
    agent_timeout: Duration = _env(
        "MULTICA_AGENT_TIMEOUT", "0", "Wall-clock cap per task; 0 = none"
    )
    idle_retries: Count = _env(
        "MULTICA_AGENT_IDLE_RETRIES", "0", "Retries after a watchdog kill (resume or fresh)"
    )
    kill_grace: Duration = _env(
        "MULTICA_AGENT_KILL_GRACE", "5s", "SIGTERM to SIGKILL grace when stopping an agent"
    )
    agent_user: str = _env(
        "MULTICA_AGENT_USER",
        "",
        "User (name or uid) a root daemon runs agents as, or a pool (`a,b,c`, uid range "
        "`2000-2009`): one user per running task; empty = the daemon's own",
    )
    agent_allow_root: Flag = _env(
        "MULTICA_AGENT_ALLOW_ROOT",
        "0",
        "`1` lets a root daemon of a remote server run agents as root (they can read its token)",
    )
    agent_pid_namespace: Flag = _env(
        "MULTICA_AGENT_PID_NAMESPACE",
        "1",
        "Each task's agent in a pid namespace (and /proc) of its own where the kernel allows; "
        "`0` leaves agents in the daemon's (cgroups and the uid sweep still apply)",
    )
    agent_memory_max: Size = _env(
        "MULTICA_AGENT_MEMORY_MAX",
        "0",
        "Memory each task's processes may use together (cgroup), e.g. `4G`; past it the "
        "kernel kills in the task and it fails `agent_error.out_of_memory`; 0 = no limit",
    )
    agent_pids_max: Pids = _env(
        "MULTICA_AGENT_PIDS_MAX",
        "4096",
        "Processes and threads each task may have at once (cgroup): a fork bomb stops there; "
        "0 = no limit",
    )
    agent_cpu_weight: Weight = _env(
        "MULTICA_AGENT_CPU_WEIGHT",
        "100",
        "Each task's CPU share against the others' (cgroup `cpu.weight`, 1-10000; 100 = equal)",
    )
    command_path: str = _env("MULTICA_COMMAND_PATH", "", "Executable for the `command` backend")
    command_args: Words = _env("MULTICA_COMMAND_ARGS", "", "Arguments for it (shell words)")
    scripted_backend: Flag = _env(
        "MULTICA_SCRIPTED_BACKEND", "0", "`1` registers the `scripted` backend (tests, demos)"
    )
    claude: AgentCliSettings = _agent_cli("Claude Code", models="Claude")
    codex: AgentCliSettings = _agent_cli("Codex")
    codex_mode: CodexMode = _env(
        "MULTICA_CODEX_MODE",
        "exec",
        "How Codex runs: `exec` (`codex exec --json`) or `app-server` (JSON-RPC over stdio)",
    )
    opencode: AgentCliSettings = _agent_cli("OpenCode", idle="10m")
    gemini: AgentCliSettings = _agent_cli("Gemini CLI", models="Gemini")
    hermes: AgentCliSettings = _agent_cli("Hermes Agent", models="Hermes")
    pi: AgentCliSettings = _agent_cli("Pi")
    qwen: AgentCliSettings = _agent_cli("Qwen Code")
    copilot: AgentCliSettings = _agent_cli("Copilot CLI", models="Copilot")
    cursor: AgentCliSettings = _agent_cli("Cursor Agent", models="Cursor", command="cursor-agent")
    codebuddy: AgentCliSettings = _agent_cli("CodeBuddy Code", models="CodeBuddy")
    openclaw: AgentCliSettings = _agent_cli("OpenClaw")
    antigravity: AgentCliSettings = _agent_cli(
        "Antigravity CLI", models="Antigravity", command="agy"
    )
    deveco: AgentCliSettings = _agent_cli("DevEco Code", models="DevEco")
    dsh: AgentCliSettings = _agent_cli("DeepSeek Harness", models="dsh")
    omp: AgentCliSettings = _agent_cli("Oh-My-Pi")
    # ACP agents offered from their entry alone, untested (backends/acp/catalog.py).
    kimi: AgentCliSettings = _agent_cli("Kimi Code CLI", models="Kimi")
    kiro: AgentCliSettings = _agent_cli("Kiro CLI", models="Kiro", command="kiro-cli")
    qoder: AgentCliSettings = _agent_cli("Qoder CLI", models="Qoder", command="qodercli")
    qoderclicn: AgentCliSettings = _agent_cli("Qoder CLI (China)", models="Qoder")
    traecli: AgentCliSettings = _agent_cli("Trae CLI", models="Trae")
    grok: AgentCliSettings = _agent_cli("Grok Build CLI", models="Grok")
    qwenpaw: AgentCliSettings = _agent_cli("QwenPaw")
    mcode: AgentCliSettings = _agent_cli("MiniMax Code", models="MiniMax")
    dim: AgentCliSettings = _agent_cli("Dim")
    reasonix: AgentCliSettings = _agent_cli("Reasonix")
    gc_enabled: Flag = _env(
        "MULTICA_GC_ENABLED", "1", "Remove finished tasks' work dirs and idle repo caches"
    )
    gc_interval: Duration = _env("MULTICA_GC_INTERVAL", "2h", "How often the GC runs")
    gc_ttl: Duration = _env(
        "MULTICA_GC_TTL", "24h", "A done/cancelled issue's dirs go this long after its update"
    )
    gc_orphan_ttl: Duration = _env(
        "MULTICA_GC_ORPHAN_TTL", "72h", "A dir with no parent the server knows goes at this age"
    )
    gc_artifact_ttl: Duration = _env(
        "MULTICA_GC_ARTIFACT_TTL",
        "12h",
        "Build outputs of a task finished this long ago are removed (its dir stays); 0 = never",
    )
    gc_artifact_patterns: Patterns = _env(
        "MULTICA_GC_ARTIFACT_PATTERNS",
        "node_modules,.next,.turbo",
        "Directory names counted as build outputs",
    )
    gc_repo_ttl: Duration = _env(
        "MULTICA_GC_REPO_TTL", "720h", "A repo cache no checkout used this long goes; 0 = never"
    )
    plugin_dev_origins: Origins = _env(
        "MULTICA_PLUGIN_DEV_ORIGINS",
        "",
        "Origins of plugin MCP servers allowed off the public internet (plugin development)",
    )
    plugin_dev_ca: str = _env(
        "MULTICA_PLUGIN_DEV_CA", "", "CA bundle trusted for those origins (else the system's)"
    )
    home: Path = _derived("The home directory (HOME): where ~/.multica is read", Path("~"))
    token_source: str = _derived("Where `token` came from: the variable, a file, or ''", "")
    agent_identity: AgentUser | None = _derived(
        "The (first) account `agent_user` names, checked; None: agents run as the daemon's user",
        None,
    )
    agent_pool: tuple[AgentUser, ...] = _derived(
        "Every account `agent_user` names, checked; (): agents run as the daemon's user", ()
    )

    @property
    def embedded(self) -> bool:
        """True when no server URL is set and the daemon runs the embedded server itself."""
        return not self.server_url

    @property
    def embedded_token(self) -> str:
        """The token the embedded server is given: only MULTICA_DAEMON_TOKEN, never a Multica
        login token from config.json (that one belongs to the Multica server, and would leak
        to whoever can reach the embedded server's port); '' = its generated server.token."""
        return self.token if self.token_source == "MULTICA_DAEMON_TOKEN" else ""

    def agent_cli(self, name: str) -> AgentCliSettings:
        """The path, arguments, default model and idle window configured for one agent CLI."""
        cli = getattr(self, name)
        assert isinstance(cli, AgentCliSettings), name
        return cli

    def idle_window(self, backend: str) -> float:
        """The idle window for one backend's runs, in seconds (0: no watchdog).

        As in Multica: a backend's own window (`MULTICA_<BACKEND>_IDLE_WATCHDOG`) only ever
        narrows `MULTICA_AGENT_IDLE_WATCHDOG`, its 0 means the global window, and the global 0
        turns the watchdog off for every backend."""
        cli = getattr(self, backend, None)
        own = cli.idle_watchdog if isinstance(cli, AgentCliSettings) else 0.0
        if self.idle_watchdog <= 0 or own <= 0:
            return self.idle_watchdog
        return min(own, self.idle_watchdog)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build the settings; raise ConfigError naming the first bad variable."""
        env = dict(os.environ if environ is None else environ)
        home = Path(env.get("HOME") or Path.home())
        values: dict[str, Any] = {"home": home}
        for variable in _variables():
            raw = env.get(variable.var)
            if raw is None or (raw == "" and variable.key != "server_url"):
                continue
            values[variable.key] = _parse(variable, raw)
        profile_dir(home, values.get("profile", ""))  # a bad name stops start-up, whatever reads it
        fill_from_config(values, home, normalize_server_url)
        values.setdefault("device_name", socket.gethostname())
        state_home = Path(env.get("XDG_STATE_HOME") or home / ".local" / "state")
        values.setdefault("state_dir", state_home / "agent-daemon")
        profile = values.get("profile", "")
        values.setdefault("workspaces_root", default_workspaces_root(home, profile))
        for variable in _variables():
            if variable.key not in values:
                values[variable.key] = _parse(variable, variable.default)
        pool = resolve_agent_pool(values["agent_user"])
        values["agent_pool"] = pool
        values["agent_identity"] = pool[0] if pool else None
        if len(pool) > 1:
            # One user per running task: the pool bounds how many run at once.
            values["max_concurrent_tasks"] = min(values["max_concurrent_tasks"], len(pool))
        for name, field in cls.model_fields.items():
            if field.annotation is AgentCliSettings:
                parts = (values.pop(f"{name}_{part}") for part in AgentCliSettings._fields)
                values[name] = AgentCliSettings(*parts)
        return cls(**values)


def _variables() -> list[Variable]:
    """Every variable the settings read, in declaration order (derived fields have none)."""
    found: list[Variable] = []
    for name, field in Settings.model_fields.items():
        extra = field.json_schema_extra
        if not isinstance(extra, dict):
            continue
        if "env" in extra:
            kind = next((m for m in field.metadata if isinstance(m, Kind)), TEXT)
            var, default = str(extra["env"]), str(extra["env_default"])
            found.append(Variable(name, var, default, field.description or "", kind))
        elif "agent_cli" in extra:
            label, models, idle = (str(extra[k]) for k in ("agent_cli", "models", "idle"))
            found += _cli_variables(name, label, models, idle, str(extra.get("command", "")))
    return found


def _parse(variable: Variable, raw: str) -> Any:
    try:
        return variable.kind.convert(raw)
    except ValueError as exc:
        expected = variable.kind.syntax
        raise ConfigError(f"{variable.var}={raw!r} is invalid: expected {expected}") from exc


def env_vars() -> list[tuple[str, str, str]]:
    """(variable, default, description) for every setting, in declaration order."""
    return [(v.var, v.default, v.doc) for v in _variables()]
