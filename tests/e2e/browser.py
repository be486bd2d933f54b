"""Headless Chromium from the distribution's packages, driven through its chromedriver.

Selenium talks to `/usr/bin/chromedriver` itself (no Selenium Manager, no browser download).
The browser is installed by `.ci/install-system-deps`; where it is missing the tests fail as
root or in CI (where it must be there) and skip elsewhere, with the reason.

Selenium's calls block: a test on an event loop makes them in a thread (`Browser.call`), so the
loop keeps reading the daemon's log meanwhile.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from tests.helpers import eventually

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    # As root Chromium refuses to start with its sandbox; CI runs as root.
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,800",
)
T = TypeVar("T")
_READ = """
const [selector, attribute] = arguments;
return Array.from(document.querySelectorAll(selector),
    (e) => (attribute ? e.getAttribute(attribute) ?? "" : e.textContent.trim()));
"""


def require_chromium() -> None:
    """Fail (as root or in CI) or skip (elsewhere) when the browser or its driver is missing."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return
    reason = f"{', '.join(missing)} missing: `bash .ci/install-system-deps` installs them (as root)"
    if os.geteuid() == 0 or os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


class Browser:
    """One Chromium; its DOM is read by CSS selector, in a thread."""

    def __init__(self, driver: webdriver.Chrome, shots: Path) -> None:
        self.driver = driver
        self.shots = shots

    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in a worker thread."""
        return await anyio.to_thread.run_sync(fn, *args)

    async def open(self, url: str) -> None:
        """Load `url`."""
        await self.call(self.driver.get, url)

    def _texts(self, selector: str, attribute: str) -> list[str]:
        # One script reads every match at once: between two reads element by element the
        # page may redraw its tables, and a stale element would read as no element.
        found = self.driver.execute_script(_READ, selector, attribute)
        assert isinstance(found, list)
        return [str(value) for value in found]

    async def texts(self, selector: str, attribute: str = "") -> list[str]:
        """The text (or `attribute`) of every element matching `selector`, now."""
        return await self.call(self._texts, selector, attribute)

    async def wait_for(
        self,
        predicate: Callable[[list[str]], bool],
        selector: str,
        attribute: str = "",
        within: float = 30.0,
    ) -> list[str]:
        """Poll the DOM until `predicate` holds for what `selector` matches; returns it."""
        seen: list[str] = []

        async def holds() -> bool:
            nonlocal seen
            seen = await self.texts(selector, attribute)
            return predicate(seen)

        try:
            await eventually(holds, within=within, every=0.05)
        except TimeoutError:
            raise AssertionError(f"{selector}: still {seen!r} after {within}s") from None
        return seen

    async def errors(self) -> list[str]:
        """What the page's console reported as errors since last asked (a refused request, a
        script error, a Content-Security-Policy violation)."""
        logs = await self.call(self.driver.get_log, "browser")
        return [str(entry["message"]) for entry in logs if entry["level"] == "SEVERE"]

    async def shot(self, name: str) -> Path:
        """A PNG of the page now, saved among the test's artifacts."""
        path = self.shots / f"{name}.png"
        await self.call(self.driver.save_screenshot, str(path))
        print(f"screenshot: {path}")
        return path


@contextmanager
def chromium(profile: Path, shots: Path) -> Iterator[Browser]:
    """A headless Chromium with a fresh profile in `profile`; screenshots go to `shots`."""
    require_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    try:
        driver.set_page_load_timeout(30)
        yield Browser(driver, shots)
    finally:
        driver.quit()
