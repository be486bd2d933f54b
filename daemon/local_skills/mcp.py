"""Each provider's MCP servers, from its user config and (Claude Code) its plugins.

`~/.claude.json`, Codex's `config.toml`, `~/.cursor/mcp.json`, OpenCode's `opencode.json`,
OpenClaw's `openclaw.json`, CodeBuddy's (JSON with comments) and Kimi's `mcp.json`, as
Multica's daemon reads them: each server's name, transport, source and whether it is enabled.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from daemon.local_skills.roots import (
    MAX_BUNDLE,
    claude_plugins,
    component_paths,
    json_file,
    plugin_manifest,
)


def list_mcp(provider: str, home: str, env: Mapping[str, str]) -> tuple[list[dict[str, Any]], bool]:
    """The provider's MCP servers from its user config (and Claude Code's plugins)."""
    where = _mcp_config(provider, home, env)
    if where is None:
        return [], False
    path, key, kind = where
    out: list[dict[str, Any]] = []
    if os.path.exists(path):
        with open(path, "rb") as source:
            raw = source.read(MAX_BUNDLE)
        config = _parse(raw, kind)
        out += _summaries(_nested(config, key), "User config")
    if provider == "claude":
        for _, name, install in claude_plugins(home):
            manifest = plugin_manifest(install)
            for file in component_paths(install, manifest.get("mcpServers"), ".mcp.json"):
                found = json_file(file)
                servers = _nested(found, "mcpServers") if isinstance(found, dict) else {}
                out += _summaries(servers, f"Claude Plugin · {name}")
    seen: dict[str, dict[str, Any]] = {}
    for server in out:
        seen.setdefault(server["name"], server)
    return sorted(seen.values(), key=lambda s: str(s["name"]).lower()), True


def _mcp_config(provider: str, home: str, env: Mapping[str, str]) -> tuple[str, str, str] | None:
    """(file, key, format) of the provider's user-level MCP servers, or None for none."""
    if provider == "claude":
        return os.path.join(home, ".claude.json"), "mcpServers", "json"
    if provider == "codebuddy":
        config = env.get("CODEBUDDY_CONFIG_DIR", "").strip() or os.path.join(home, ".codebuddy")
        candidates = [os.path.join(config, ".mcp.json"), os.path.join(config, "mcp.json")]
        candidates.append(os.path.join(home, ".codebuddy.json"))
        path = next((c for c in candidates if os.path.isfile(c)), candidates[0])
        return path, "mcpServers", "jsonc"
    if provider == "kimi":
        kimi = env.get("KIMI_CODE_HOME", "").strip() or os.path.join(home, ".kimi-code")
        return os.path.join(kimi, "mcp.json"), "mcpServers", "json"
    if provider == "codex":
        codex = env.get("CODEX_HOME", "").strip() or os.path.join(home, ".codex")
        return os.path.join(codex, "config.toml"), "mcp_servers", "toml"
    if provider == "cursor":
        return os.path.join(home, ".cursor", "mcp.json"), "mcpServers", "json"
    if provider == "opencode":
        config = env.get("XDG_CONFIG_HOME", "").strip() or os.path.join(home, ".config")
        return os.path.join(config, "opencode", "opencode.json"), "mcp", "json"
    if provider == "openclaw":
        state = env.get("OPENCLAW_STATE_DIR", "").strip() or os.path.join(home, ".openclaw")
        path = env.get("CLAWDBOT_CONFIG_PATH", "").strip() or os.path.join(state, "openclaw.json")
        return path, "mcp.servers", "json"
    return None


def _parse(raw: bytes, kind: str) -> Any:
    text = raw.decode("utf-8")
    if kind == "toml":
        # Imported here: the agent user's interpreter may predate tomllib (3.11); without it
        # Codex's servers are not listed, and the skills still are.
        try:
            import tomllib
        except ImportError:
            raise ValueError("reading config.toml needs Python 3.11") from None
        return tomllib.loads(text)
    return json.loads(_strip_jsonc(text) if kind == "jsonc" else text)


def _strip_jsonc(text: str) -> str:
    """JSON with comments and trailing commas made plain JSON (strings left alone)."""
    out = re.sub(
        r'"(?:\\.|[^"\\])*"|//[^\n]*|/\*.*?\*/',
        lambda m: m.group(0) if m.group(0)[0] == '"' else " ",
        text,
        flags=re.S,
    )
    return re.sub(
        r'"(?:\\.|[^"\\])*"|,(\s*[}\]])', lambda m: m.group(1) if m.group(1) else m.group(0), out
    )


def _nested(config: Any, path: str) -> dict[str, Any]:
    for part in path.split("."):
        config = config.get(part) if isinstance(config, dict) else None
    return config if isinstance(config, dict) else {}


def _summaries(servers: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    out = []
    for name, entry in servers.items():
        if not isinstance(entry, dict) or not str(name).strip():
            continue
        enabled = entry.get("enabled") if isinstance(entry.get("enabled"), bool) else True
        if entry.get("disabled") is True:
            enabled = False
        out.append(
            {"name": name, "transport": _transport(entry), "source": source, "enabled": enabled}
        )
    return out


def _transport(entry: Mapping[str, Any]) -> str:
    kind = str(entry.get("type") or "").lower()
    if kind in ("local", "stdio"):
        return "stdio"
    if kind in ("remote", "http", "streamable-http"):
        return "http"
    if kind == "sse":
        return "sse"
    return "stdio" if "command" in entry else "http" if "url" in entry else "unknown"
