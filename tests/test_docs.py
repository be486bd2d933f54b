"""The README and docs/ stay true to the code and to each other: the settings tables, CI's test
command, and every relative link and anchor."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from daemon.config import env_vars

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "deploy" / "README.md"]
"""The pages whose links are checked: the front door, docs/, and the deploy guide it links to."""

_ROW = re.compile(r"^\| `([A-Z_]+)` \| (`[^`]*`|—) \|.*$", flags=re.MULTILINE)


def _config_table() -> str:
    start, end = "<!-- config-table:start -->", "<!-- config-table:end -->"
    return CONFIGURATION.split(start)[1].split(end)[0]


def test_config_table_lists_every_setting_with_its_default() -> None:
    """Each env variable of the settings model appears in the table with its default, in order."""
    rows = [(m[1], m[2]) for m in _ROW.finditer(_config_table())]
    expected = [(var, f"`{default}`" if default else "—") for var, default, _ in env_vars()]
    assert rows == expected


def test_readme_settings_are_rows_of_the_configuration_table() -> None:
    """The README's few settings are copied whole from the full table, so neither goes stale."""
    section = README.split("## Settings everyone touches")[1].split("\n## ")[0]
    readme_rows = [m[0] for m in _ROW.finditer(section)]
    full_rows = {m[0] for m in _ROW.finditer(_config_table())}
    assert readme_rows, "the README shows no settings"
    assert [row for row in readme_rows if row not in full_rows] == []


def test_ci_runs_the_readme_test_command() -> None:
    """`.ci/run` takes its test command from the README rather than keeping its own copy."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "README.md" in ci and "bash -c" in ci
    assert re.search(
        r"^bash .ci/install-system-deps && python3 -m venv .venv && .*pytest$",
        README,
        flags=re.MULTILINE,
    )
    found = subprocess.run(
        ["bash", str(ROOT / ".ci" / "run"), "--print-command"],
        capture_output=True,
        text=True,
        check=True,
    )
    oldest, newest = found.stdout.splitlines()
    assert oldest.startswith("bash .ci/install-system-deps && python3 -m venv .venv")
    assert oldest.endswith("pytest")
    assert newest.startswith("bash .ci/newest-python .venv-newest && ")
    assert ".venv-newest/bin/pytest -m 'not real_cli' --ignore=tests/e2e" in newest


# --- links -------------------------------------------------------------------------------------

_FENCE = re.compile(r"^```.*?^```$", flags=re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", flags=re.MULTILINE)
_HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lower-cased, punctuation other than
    `-` and `_` dropped, each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    """Every anchor a page offers: its headings' slugs (a repeated one gets -1, -2, ...) and any
    explicit `<a name>`."""
    seen: dict[str, int] = {}
    found = set(_HTML_ANCHOR.findall(markdown))
    for heading in _HEADING.findall(_FENCE.sub("", markdown)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(page: Path) -> list[str]:
    """The relative links and anchors of `page` that lead nowhere, each as `target: why`."""
    text = _CODE_SPAN.sub("", _FENCE.sub("", page.read_text(encoding="utf-8")))
    broken = []
    for target in _LINK.findall(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: — not checked here
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists():
            broken.append(f"{target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where.read_text("utf-8")):
            broken.append(f"{target}: no heading with that anchor in {where.name}")
    return broken


def test_slugs_follow_githubs_rules() -> None:
    """Headings with quotes, commas, parentheses and code become the anchors GitHub makes."""
    assert slug("Codex's two modes") == "codexs-two-modes"
    assert slug("systemd, containers, Kubernetes") == "systemd-containers-kubernetes"
    assert slug("Extensions (not in Multica)") == "extensions-not-in-multica"
    assert slug("The `status` page_2 — now") == "the-status-page_2--now"
    assert anchors("# Notes\n## Notes\n```\n# not a heading\n```\n") == {"notes", "notes-1"}


def test_a_broken_link_or_anchor_is_reported(tmp_path: Path) -> None:
    """The check finds a missing file and a missing anchor, and passes good ones and code."""
    (tmp_path / "other.md").write_text("# Other page\n## A part\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n[ok](other.md#a-part) [self](#page) [web](https://example.com/x)\n"
        "[gone](missing.md) [nowhere](other.md#no-part) [here](#nothing)\n"
        "`[in code](missing.md)`\n```\n[fenced](missing.md)\n```\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#no-part: no heading with that anchor in other.md",
        "#nothing: no heading with that anchor in page.md",
    ]


def test_every_relative_link_and_anchor_resolves() -> None:
    """Every link between the README, docs/ and the deploy guide leads to a file and heading."""
    broken = {page.relative_to(ROOT).as_posix(): broken_links(page) for page in PAGES}
    assert {page: links for page, links in broken.items() if links} == {}
