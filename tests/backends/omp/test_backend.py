"""The Oh-My-Pi backend: Pi's command line and events under omp's name."""

from __future__ import annotations

from pathlib import Path

from backends.base import RunSpec, RunStatus
from backends.omp import OmpBackend
from tests.backends.support import feed_file

PI_FIXTURES = Path(__file__).parents[2] / "fixtures" / "pi"


def test_argv_is_pis_with_omps_executable() -> None:
    """`omp -p --mode json`, the model and the session, the prompt on stdin."""
    spec = RunSpec(prompt="p", workdir=Path("/w"), env={}, model="fake/m")
    assert OmpBackend().argv(spec, resume="s1") == [
        "omp", "-p", "--mode", "json", "--model", "fake/m", "--session", "s1"
    ]  # fmt: skip


def test_its_runs_report_usage_and_errors_as_omps() -> None:
    """Pi's events, with omp's name on the usage and in errors."""
    parser = OmpBackend().parser("fake/m", "")
    feed_file(parser, PI_FIXTURES / "text.jsonl")
    result = parser.finish(0, "")
    assert result.status is RunStatus.COMPLETED and result.usage
    assert {u.provider for u in result.usage} == {"omp"}
    assert OmpBackend().parser("", "").finish(1, "").error.startswith("omp exited with code 1")
