"""Where each provider keeps its user-level skills, and Claude Code's enabled plugins.

Skill roots, in priority order (the first root to have a key wins): the provider's own
(`~/.claude/skills`, `$CODEX_HOME/skills`, `~/.cursor/skills`, ... — `_PROVIDER_ROOTS`, as
Multica's daemon lists them), then the cross-tool `~/.agents/skills`, then — for Claude Code
— each enabled plugin's skills (`~/.claude/settings.json`'s `enabledPlugins`, installed where
`~/.claude/plugins/installed_plugins.json` says), keyed `<plugin>:<skill>`.

Standard library only, and no import of the daemon's own: reader.py may run this package as
the agent user (see inventory.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAX_FILE = 1 << 20
MAX_BUNDLE = 8 << 20
MAX_FILES = 256
MAX_DEPTH = 4
PROVIDER, UNIVERSAL, PLUGIN = "provider", "universal", "plugin"


# Each provider's user-level skill folder: (variable naming its home, the home's default
# under HOME, the folder under that home).
_PROVIDER_ROOTS: dict[str, tuple[str, str, str]] = {
    "claude": ("", ".claude", "skills"),
    "codebuddy": ("", ".codebuddy", "skills"),
    "codex": ("CODEX_HOME", ".codex", "skills"),
    "copilot": ("", ".copilot", "skills"),
    "opencode": ("", ".config/opencode", "skills"),
    "deveco": ("", ".config/deveco", "skills"),
    "openclaw": ("", ".openclaw", "skills"),
    "pi": ("", ".pi/agent", "skills"),
    "omp": ("", ".omp/agent", "skills"),
    "cursor": ("", ".cursor", "skills"),
    "hermes": ("", ".hermes", "skills"),
    "kimi": ("", ".kimi", "skills"),
    "reasonix": ("REASONIX_HOME", ".reasonix", "skills"),
    "dsh": ("DSH_HOME", ".dsh", "skills"),
    "kiro": ("", ".kiro", "skills"),
    "qoder": ("", ".qoder", "skills"),
    "qoderclicn": ("", ".qoder-cn", "skills"),
    "traecli": ("", ".traecli", "skills"),
    "antigravity": ("", ".gemini/antigravity-cli", "skills"),
    "grok": ("GROK_HOME", ".grok", "skills"),
    "qwen": ("QWEN_HOME", ".qwen", "skills"),
    "mcode": ("", ".minimax", "skills"),
}


@dataclass(frozen=True)  # no slots: the agent user's interpreter may be 3.9
class Root:
    """One place skills are found, and how the ones found there are keyed."""

    path: str
    kind: str
    key_prefix: str = ""
    plugin: str = ""


def skill_roots(provider: str, home: str, env: Mapping[str, str]) -> list[Root] | None:
    """The provider's skill roots in priority order, or None when it keeps no user skills."""
    if provider == "qwenpaw":
        base = env.get("QWENPAW_WORKING_DIR", "").strip() or env.get("COPAW_WORKING_DIR", "")
        legacy = os.path.join(home, ".copaw")
        base = base.strip() or (
            legacy if os.path.exists(legacy) else os.path.join(home, ".qwenpaw")
        )
        own = os.path.join(base, "skill_pool")
    elif provider in _PROVIDER_ROOTS:
        variable, default, folder = _PROVIDER_ROOTS[provider]
        base = (env.get(variable, "").strip() if variable else "") or os.path.join(home, default)
        own = os.path.join(base, folder)
    else:
        return None
    roots = [Root(own, PROVIDER), Root(os.path.join(home, ".agents", "skills"), UNIVERSAL)]
    if provider == "claude":
        for plugin_id, name, install in claude_plugins(home):
            manifest = plugin_manifest(install)
            for path in component_paths(install, manifest.get("skills"), "skills"):
                roots.append(Root(path, PLUGIN, f"{name}:", plugin_id))
    return roots


def claude_plugins(home: str) -> list[tuple[str, str, str]]:
    """Claude Code's enabled plugins as (id, name, install path), by id."""
    settings = json_file(os.path.join(home, ".claude", "settings.json"))
    enabled = settings.get("enabledPlugins") if isinstance(settings, dict) else None
    installed = json_file(os.path.join(home, ".claude", "plugins", "installed_plugins.json"))
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    if not isinstance(enabled, dict) or not isinstance(plugins, dict):
        return []
    out = []
    for plugin_id in sorted(k for k, on in enabled.items() if on is True):
        installs = [i for i in plugins.get(plugin_id) or [] if isinstance(i, dict)]
        if not installs:
            continue
        chosen = next((i for i in reversed(installs) if i.get("scope") == "user"), installs[-1])
        install = str(chosen.get("installPath") or "").strip()
        name = str(plugin_manifest(install).get("name") or "").strip() if install else ""
        name = name or plugin_id.split("@", 1)[0].strip()
        if install and name:
            out.append((plugin_id, name, install))
    return out


def plugin_manifest(install: str) -> dict[str, Any]:
    found = json_file(os.path.join(install, ".claude-plugin", "plugin.json"))
    return found if isinstance(found, dict) else {}


def component_paths(install: str, declared: Any, default: str) -> list[str]:
    """A plugin's component paths: the default, then what its manifest declares, each inside
    the plugin's folder."""
    given = (
        [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
    )
    out: list[str] = []
    for candidate in [default, *given]:
        if not isinstance(candidate, str) or not candidate.strip():
            continue
        path = os.path.normpath(os.path.join(install, candidate.strip()))
        if os.path.relpath(path, install).split(os.sep)[0] != ".." and path not in out:
            out.append(path)
    return out


def json_file(path: str) -> Any:
    try:
        with open(path, "rb") as source:
            return json.loads(source.read(MAX_BUNDLE))
    except (OSError, ValueError):
        return None
