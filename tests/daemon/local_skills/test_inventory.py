"""A runtime's user-level skills and MCP servers, read from a home laid out on disk as each
CLI keeps it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from daemon.local_skills.inventory import answer
from daemon.local_skills.mcp import list_mcp
from daemon.local_skills.skills import front_matter, list_skills, load_skill


def skill(folder: Path, front: str = "", **files: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(front + "Body.\n")
    for name, text in files.items():
        path = folder / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def plugin(home: Path, plugin_id: str, name: str) -> Path:
    """An enabled Claude Code plugin installed under the home."""
    install = home / ".claude" / "plugins" / "cache" / name
    (install / ".claude-plugin").mkdir(parents=True)
    (install / ".claude-plugin" / "plugin.json").write_text(json.dumps({"name": name}))
    settings = home / ".claude" / "settings.json"
    enabled = json.loads(settings.read_text())["enabledPlugins"] if settings.exists() else {}
    settings.write_text(json.dumps({"enabledPlugins": {**enabled, plugin_id: True}}))
    installed = home / ".claude" / "plugins" / "installed_plugins.json"
    known = json.loads(installed.read_text())["plugins"] if installed.exists() else {}
    entry = [
        {"scope": "project", "installPath": "/nowhere"},
        {"scope": "user", "installPath": str(install)},
    ]
    installed.write_text(json.dumps({"plugins": {**known, plugin_id: entry}}))
    return install


def test_provider_skills_come_first_then_the_shared_root_then_plugins(tmp_path: Path) -> None:
    """`~/.claude/skills` wins a key over `~/.agents/skills`; a plugin's skills are keyed
    `<plugin>:<skill>` and named so; nested skills are found; each counts its files."""
    home = tmp_path
    skill(
        home / ".claude/skills/review",
        "---\nname: Review\ndescription: 'It''s fine'\n---\n",
        notes__a="x",
    )
    skill(home / ".agents/skills/review", "---\nname: Shadowed\n---\n")
    skill(home / ".agents/skills/team/deploy", "", run="echo")
    install = plugin(home, "paper@market", "paper")
    skill(install / "skills" / "design")
    skills, supported = list_skills("claude", str(home), {})
    assert supported
    assert [(s["key"], s["name"], s["root"], s["file_count"]) for s in skills] == [
        ("paper:design", "paper:design", "plugin", 1),
        ("review", "Review", "provider", 2),
        ("team/deploy", "deploy", "universal", 2),
    ]
    review = skills[1]
    assert review["description"] == "It's fine"
    assert review["source_path"] == "~/.claude/skills/review" and review["can_disable"] is True
    assert skills[0]["plugin"] == "paper@market"


def test_files_that_cannot_round_trip_are_not_counted_or_imported(tmp_path: Path) -> None:
    """Binary by extension or content, hidden, a licence, over 1 MiB: left out of both."""
    folder = skill(tmp_path / ".cursor/skills/s", "", keep="text", LICENSE="mit")
    (folder / "logo.png").write_bytes(b"\x89PNG")
    (folder / "utf16.txt").write_bytes("hi".encode("utf-16-le"))
    (folder / "big.txt").write_text("x" * ((1 << 20) + 1))
    (folder / ".hidden").write_text("h")
    (summary,), _ = list_skills("cursor", str(tmp_path), {})
    assert summary["file_count"] == 2 and "can_disable" not in summary
    bundle = load_skill("cursor", str(tmp_path), {}, "s")
    assert bundle["content"] == "Body.\n"
    assert bundle["files"] == [{"path": "keep", "content": "text"}]


def test_an_import_resolves_the_key_the_list_named(tmp_path: Path) -> None:
    """A provider folder without a SKILL.md does not shadow the shared root's skill; a key
    that leaves its root is refused; an unknown one is not found."""
    (tmp_path / ".codex/skills/lint").mkdir(parents=True)
    skill(
        tmp_path / ".agents/skills/lint", "---\nname: lint\ndescription: |\n  Two\n  lines\n---\n"
    )
    bundle = load_skill("codex", str(tmp_path), {}, "lint")
    assert bundle["source_path"] == "~/.agents/skills/lint"
    assert bundle["description"] == "Two\nlines"
    assert answer({"op": "import", "provider": "codex", "home": str(tmp_path), "key": "../x"}) == {
        "status": "failed",
        "error": "invalid skill key",
    }
    missing = answer({"op": "import", "provider": "codex", "home": str(tmp_path), "key": "nope"})
    assert missing == {"status": "failed", "error": "local skill not found"}


def test_a_home_variable_moves_the_providers_root(tmp_path: Path) -> None:
    """`CODEX_HOME` (and the like) name where the provider keeps its skills."""
    skill(tmp_path / "elsewhere/skills/fmt")
    skills, _ = list_skills("codex", str(tmp_path), {"CODEX_HOME": str(tmp_path / "elsewhere")})
    assert [s["key"] for s in skills] == ["fmt"]


def test_a_provider_without_user_skills_is_unsupported(tmp_path: Path) -> None:
    """The list says so; an import fails naming the provider."""
    listing = answer({"op": "list", "provider": "scripted", "home": str(tmp_path)})
    assert listing == {"status": "completed", "skills": [], "supported": False,
                       "mcp_servers": [], "mcp_supported": False}  # fmt: skip
    failed = answer({"op": "import", "provider": "scripted", "home": str(tmp_path), "key": "k"})
    assert failed["error"] == 'provider "scripted" does not expose runtime local skills'


def test_mcp_servers_come_from_the_user_config_and_plugins(tmp_path: Path) -> None:
    """Claude Code's `~/.claude.json` and each plugin's `.mcp.json`: name, transport, source,
    enabled; a name already listed is not listed again; sorted by name."""
    servers = {
        "github": {"type": "http", "url": "https://x"},
        "files": {"command": "node", "disabled": True},
    }
    (tmp_path / ".claude.json").write_text(json.dumps({"mcpServers": servers}))
    install = plugin(tmp_path, "paper@m", "paper")
    own = {"mcpServers": {"paper": {"type": "sse", "url": "u"}, "github": {"command": "x"}}}
    (install / ".mcp.json").write_text(json.dumps(own))
    found, supported = list_mcp("claude", str(tmp_path), {})
    assert supported
    assert found == [
        {"name": "files", "transport": "stdio", "source": "User config", "enabled": False},
        {"name": "github", "transport": "http", "source": "User config", "enabled": True},
        {"name": "paper", "transport": "sse", "source": "Claude Plugin · paper", "enabled": True},
    ]


def test_codex_toml_and_codebuddy_json_with_comments_are_read(tmp_path: Path) -> None:
    """Codex's `[mcp_servers.*]` tables; CodeBuddy's JSON with comments and trailing commas."""
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex/config.toml").write_text(
        '[mcp_servers.docs]\nurl = "https://d"\n[mcp_servers.sh]\ncommand = "sh"\nenabled = false\n'
    )
    found, _ = list_mcp("codex", str(tmp_path), {})
    assert [(s["name"], s["transport"], s["enabled"]) for s in found] == [
        ("docs", "http", True),
        ("sh", "stdio", False),
    ]
    (tmp_path / ".codebuddy").mkdir()
    (tmp_path / ".codebuddy/.mcp.json").write_text(
        '{\n  // mine\n  "mcpServers": {"a": {"command": "x", /* ok */ "args": ["//no"],},},\n}\n'
    )
    found, _ = list_mcp("codebuddy", str(tmp_path), {})
    assert [s["name"] for s in found] == ["a"]


def test_an_unreadable_mcp_config_leaves_the_skills_listed(tmp_path: Path) -> None:
    """A broken `~/.cursor/mcp.json` makes the MCP part unsupported, not the answer failed."""
    skill(tmp_path / ".cursor/skills/s")
    (tmp_path / ".cursor/mcp.json").write_text("{not json")
    listing = answer({"op": "list", "provider": "cursor", "home": str(tmp_path)})
    assert listing["status"] == "completed" and [s["key"] for s in listing["skills"]] == ["s"]
    assert (listing["mcp_servers"], listing["mcp_supported"]) == ([], False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('---\nname: "a \\"b\\""\ndescription: plain # note\n---\n', ('a "b"', "plain")),
        ("---\ndescription: >\n  folded\n  text\nname: n\n---\n", ("n", "folded text")),
        ("no front matter", ("", "")),
    ],
)
def test_front_matter_is_read_as_yaml_writes_it(text: str, expected: tuple[str, str]) -> None:
    """Quoted, folded and plain values; no front matter, no name."""
    assert front_matter(text) == expected
