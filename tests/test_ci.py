"""CI's second interpreter: `.ci/newest-python` finds the newest Python the project claims, or
fails the build naming it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLAIMED = re.compile(r'"Programming Language :: Python :: (3\.\d+)"')


def _checkout(tmp_path: Path, classifiers: list[str]) -> Path:
    """A tree holding the script and a pyproject.toml that claims `classifiers` (3.N each)."""
    (tmp_path / ".ci").mkdir()
    shutil.copy2(ROOT / ".ci" / "newest-python", tmp_path / ".ci" / "newest-python")
    lines = "".join(f'    "Programming Language :: Python :: {v}",\n' for v in classifiers)
    (tmp_path / "pyproject.toml").write_text(
        f'[project]\nname = "x"\nclassifiers = [\n{lines}]\n', encoding="utf-8"
    )
    return tmp_path / ".ci" / "newest-python"


def _run(script: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(script), *args], capture_output=True, text=True, timeout=30, check=False
    )


def test_the_newest_claimed_python_is_the_one_found(tmp_path: Path) -> None:
    """Of the versions claimed, the highest is looked for, and the path printed runs it."""
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    script = _checkout(tmp_path, ["3.9", running])
    found = _run(script, "--print")
    assert found.returncode == 0, found.stderr
    version = subprocess.run(
        [found.stdout.strip(), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert version.stdout.strip() == str(sys.version_info[:2])


def test_a_claimed_python_missing_fails_the_build(tmp_path: Path) -> None:
    """A machine without the newest claimed Python exits 1 with one line naming it, and
    makes no environment."""
    script = _checkout(tmp_path, ["3.11", "3.99"])
    made = _run(script, str(tmp_path / "venv"))
    assert made.returncode == 1
    assert "Python 3.99 (the newest pyproject.toml claims) not found" in made.stderr
    assert not (tmp_path / "venv").exists()


def test_the_oldest_claimed_python_is_requires_python() -> None:
    """The classifiers run from requires-python's version to the newest, with no gap, so the
    two CI runs are the oldest and the newest the project claims."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    oldest = re.search(r'^requires-python = ">=(3\.\d+)"$', pyproject, flags=re.MULTILINE)
    assert oldest is not None
    minors = [int(v.split(".")[1]) for v in CLAIMED.findall(pyproject)]
    assert minors == list(range(int(oldest[1].split(".")[1]), max(minors) + 1))
