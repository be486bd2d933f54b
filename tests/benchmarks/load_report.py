"""What the load benchmark makes of one run, and the table of several: the checks of the stored
transcripts, quantiles, and the medians side by side."""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

STAMP = re.compile(r"(\d+) (\d+\.\d+);")
"""One line of the paced agent: its index and when it was printed. A row may hold several
(Multica's daemon joins the texts of a beat into one message)."""


@dataclass
class Run:
    """One daemon's figures over one window."""

    cpu: float
    """User + system CPU, % of one core."""
    kernel: float
    lag: tuple[float, float, float]
    """p50, p95, max (s), agent printed → server stored, of the lines printed in the window."""
    lines: int
    rss: tuple[float, float]
    """Median and max RSS over the window (MB)."""
    rates: dict[str, float]
    """Requests a second by endpoint, as the server counted them."""
    lost: int
    dups: int
    disorder: int
    server_cpu: float
    notes: list[str] = field(default_factory=list)


def check(
    ids: list[str],
    tasks: dict[str, Any],
    rows: dict[str, list[Any]],
    window: tuple[float, float],
) -> tuple[list[float], int, int, int]:
    """Lags of lines printed in the window; lines lost (of tasks that completed), lines or
    seqs stored twice, and transcripts whose distinct seqs are not 1..N in order."""
    lags: list[float] = []
    lost = dups = disorder = 0
    for task_id in ids:
        stored = rows.get(task_id, [])
        seqs = [seq for seq, _, _ in stored]
        if sorted(set(seqs)) != list(range(1, len(set(seqs)) + 1)):
            disorder += 1
        printed: list[int] = []
        for _, content, stored_at in stored:
            for index, at in STAMP.findall(content or ""):
                printed.append(int(index))
                if window[0] <= float(at) <= window[1]:
                    lags.append(stored_at - float(at))
        distinct = set(printed)
        dups += max(len(seqs) - len(set(seqs)), len(printed) - len(distinct))
        if tasks[task_id]["status"] == "completed":
            lost += max(distinct, default=0) - len(distinct)
    return lags, lost, dups, disorder


def quantiles(values: list[float]) -> tuple[float, float, float]:
    """p50, p95 and max (NaN for none)."""
    if not values:
        return (float("nan"),) * 3
    ordered = sorted(values)
    at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return at(0.5), at(0.95), ordered[-1]


def line(case: str, name: str, run: Run) -> str:
    """One run, on one line."""
    per = ", ".join(f"{k} {v:.1f}" for k, v in sorted(run.rates.items()) if v >= 0.05)
    q = run.lag
    return (
        f"{case} {name}: CPU {run.cpu:.1f}% ({run.kernel:.1f}% kernel; "
        f"server {run.server_cpu:.0f}%)"
        f" | lag p50 {q[0]:.3f} p95 {q[1]:.3f} max {q[2]:.3f} s over {run.lines} lines"
        f" | RSS {run.rss[0]:.0f} MB (max {run.rss[1]:.0f})"
        f" | {run.lost} lost {run.dups} dup {run.disorder} disorder | req/s {per}"
        + "".join(f" | {note}" for note in run.notes)
    )


def table(results: dict[tuple[str, str], list[Run]]) -> str:
    """The medians of each (case, daemon), as a Markdown table."""
    out = [
        "| load | daemon | CPU, % of a core (median; kernel) | lag p50 / p95 / max (s) "
        "| RSS median (max) | req/s | lost / dup / disorder | runs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (case, name), runs in results.items():

        def med(get: Callable[[Run], float], runs: list[Run] = runs) -> float:
            return statistics.median(get(r) for r in runs)

        rates: dict[str, float] = {}
        for run in runs:
            for key, value in run.rates.items():
                rates[key] = rates.get(key, 0.0) + value / len(runs)
        total = sum(v for k, v in rates.items() if "/" not in k)
        top = sorted(((v, k) for k, v in rates.items() if "/" not in k), reverse=True)[:3]
        per = f"{total:.0f} (" + ", ".join(f"{k} {v:.0f}" for v, k in top) + ")"
        out.append(
            f"| {case} | {name} | {med(lambda r: r.cpu):.1f} ({med(lambda r: r.kernel):.1f}) "
            f"| {med(lambda r: r.lag[0]):.2f} / {med(lambda r: r.lag[1]):.2f} / "
            f"{med(lambda r: r.lag[2]):.2f} | {med(lambda r: r.rss[0]):.0f} MB "
            f"({max(r.rss[1] for r in runs):.0f}) | {per} "
            f"| {sum(r.lost for r in runs)} / {sum(r.dups for r in runs)} / "
            f"{sum(r.disorder for r in runs)} | {len(runs)} |"
        )
    return "\n".join(out)
