"""The garbage collector as a long-running daemon wants it: set once, when the daemon is up.

CPython collects its youngest generation each time 700 more container objects live than at
the last collection. A daemon with many tasks running passes that mark on every beat without
leaving any garbage: each task's send is a chain of a dozen suspended coroutines with their
futures and timers, some 4,000 objects across 200 tasks, all freed by reference counting a few
milliseconds later. Each collection walked them anyway (about 1 ms each, 8 a second), and
every tenth of those the older generation too: with 200 tasks, 15-20 ms of CPU a second, about
a tenth of what the daemon spent (tests/benchmarks/bench_load.py 200x1). With the threshold
above one beat's worth of objects, a collection runs only when objects really pile up.

Everything alive when the daemon is up — modules, classes, settings, the HTTP client — lives
as long as the daemon: frozen out of the collector's sight, a full collection no longer walks
those ~60,000 objects.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Container objects allocated (less those freed) before the youngest generation is collected:
above what one beat keeps alive at 200 tasks (~4,000), so steady work alone never triggers
one."""


def settle_collector() -> None:
    """Freeze what exists now and raise the young generation's threshold (the older
    generations keep CPython's own)."""
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
