"""Idle footprint: a real `agent-daemon run` with no tasks, measured from /proc.

Run: `python -m tests.benchmarks.bench_idle [seconds]` from the repo root (default 60). The
daemon runs with its embedded server and the default poll/heartbeat intervals; after a short
settling time the script samples its CPU time and resident memory. Prints CPU % of one core
over the window and the peak RSS (VmHWM). Targets: < 1 % CPU, < 80 MiB peak RSS.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SETTLE = 5.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory_kib(pid: int, key: str) -> int:
    """A `VmRSS`/`VmHWM` line of /proc/PID/status, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def main() -> None:
    window = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            "HOME": tmp,
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT),
            "MULTICA_SCRIPTED_BACKEND": "1",
            "MULTICA_EMBEDDED_LISTEN": "127.0.0.1:0",
            "MULTICA_DAEMON_HEALTH_ADDR": "127.0.0.1:0",
            "LOG_LEVEL": "WARNING",
        }
        proc = subprocess.Popen([sys.executable, "-m", "daemon", "run"], env=env)
        try:
            time.sleep(SETTLE)
            if proc.poll() is not None:
                raise SystemExit(f"daemon exited early with {proc.returncode}")
            cpu0, t0 = cpu_seconds(proc.pid), time.monotonic()
            time.sleep(window)
            cpu1, t1 = cpu_seconds(proc.pid), time.monotonic()
            rss = memory_kib(proc.pid, "VmRSS")
            peak = memory_kib(proc.pid, "VmHWM")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
    print(f"idle window:   {t1 - t0:.1f} s (after {SETTLE:.0f} s to settle)")
    print(f"CPU:           {100 * (cpu1 - cpu0) / (t1 - t0):.2f} % of one core")
    print(f"RSS now:       {rss / 1024:.1f} MiB")
    print(f"peak RSS:      {peak / 1024:.1f} MiB")
    print(f"exit code:     {proc.returncode}")


if __name__ == "__main__":
    main()
