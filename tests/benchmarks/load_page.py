"""The status page live in headless Chromium while the load benchmark measures (`20x10p`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_WEIGHT = """
const entries = [...performance.getEntriesByType("navigation"),
                 ...performance.getEntriesByType("resource")];
return entries.map((e) => [e.name, e.transferSize, e.encodedBodySize]);
"""


@contextmanager
def page_open(url: str, home: Path, case: str) -> Iterator[None]:
    """The status page at `url`, live in headless Chromium, until the block ends; then the
    bytes it loaded: the page with its files, and the answers of its polls."""
    from tests.e2e.browser import chromium

    with chromium(home / "chromium", home) as browser:
        driver = browser.driver
        driver.get(url)
        started = time.monotonic()
        while driver.execute_script('return document.getElementById("link").dataset.state;') != (
            "live"
        ):
            if time.monotonic() - started > 30:
                raise SystemExit("the status page did not go live")
            time.sleep(0.1)
        yield
        entries = driver.execute_script(_WEIGHT)
    files = [(n, t, b) for n, t, b in entries if not n.endswith("page.json")]
    polls = [(t, b) for n, t, b in entries if n.endswith("page.json")]
    print(
        f"{case}: the page loads {sum(b for _, _, b in files)} bytes in {len(files)} files "
        f"({sum(t for _, t, _ in files)} with headers); {len(polls)} polls of page.json, "
        f"{sum(b for _, b in polls) / max(1, len(polls)):.0f} bytes each on average "
        f"({sum(t for t, _ in polls) / max(1, len(polls)):.0f} with headers)"
    )
