"""The status page on the health port: `GET /` and the files and JSON it loads.

What it is made of, and why:

* **Three static files and one JSON route, no framework, no build step, no CDN.** The page is
  one table of running tasks, one of finished ones, a list of facts and two lines of a chart:
  a few hundred lines of plain HTML, CSS and JavaScript do it, ship in the wheel as they are
  (`daemon/ops/static/`), and can be read and audited where they are served from. A framework
  would add a build step and a bundle many times the size of the page; a CDN would make the
  page depend on, and tell, a third party — from an operator's machine next to the daemon.
* **Polling, not Server-Sent Events.** The health port answers one request per connection
  under a deadline of seconds and gives each answering request a thread (health_http.py):
  a stream would hold a thread per open page and be cut at the deadline. A poll a second is
  one short request, the same kind a probe makes, and it needs no reconnection logic: a
  daemon that restarts is simply answered by the next poll (the page says how long it has
  been unreachable meanwhile).
* **Read-only and same-origin.** Every route is a GET; the page's script only fetches
  `page.json`. The Host guard of every health route applies, and a request carrying another
  site's Origin is refused. The answers forbid inline script, framing and any other origin
  (Content-Security-Policy), so even text that an agent chose (a tool's name) can only ever
  be text: the script writes it with `textContent`, never as markup.
* **Cheap when closed.** The loop tick hands the page the snapshot it already took for
  `/health` and one CPU sample a second (samples.py); the JSON is built only when asked for,
  on the request's thread.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from importlib import resources

from daemon.ops.health_request import Reply
from daemon.ops.page_view import page_document
from daemon.ops.samples import Samples
from daemon.snapshot import DaemonSnapshot

_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/page.js": ("page.js", "text/javascript; charset=utf-8"),
    "/page.css": ("page.css", "text/css; charset=utf-8"),
}
JSON_PATH = "/page.json"
PATHS = (*_FILES, JSON_PATH)
"""Every path the page answers (all GET)."""
_HEADERS = (
    (
        "Content-Security-Policy",
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
)


def _static(name: str) -> bytes:
    return resources.files("daemon.ops").joinpath("static", name).read_bytes()


class Page:
    """Serves the status page from the snapshot the health loop publishes to it."""

    def __init__(
        self,
        *,
        started_wall: float,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        samples: Samples | None = None,
    ) -> None:
        self._files = {path: (_static(name), kind) for path, (name, kind) in _FILES.items()}
        self._started_wall = started_wall
        self._clock = clock
        self._wall = wall
        self._pid = os.getpid()
        self.samples = samples or Samples(clock=clock, wall=wall)
        # Replaced whole by the loop, read by request threads: (snapshot, when it was taken).
        self._published: tuple[DaemonSnapshot | None, float] = (None, clock())

    def publish(self, snapshot: DaemonSnapshot | None) -> None:
        """The loop's tick: keep `snapshot` for the next request, and sample the chart."""
        self._published = (snapshot, self._clock())
        runs = snapshot.runs if snapshot is not None else ()
        self.samples.observe(max((run.transcript_lag for run in runs), default=0.0))

    def answer(self, path: str, headers: Mapping[str, str]) -> Reply:
        """The reply to `GET path` (one of `PATHS`); the Host was checked by the caller."""
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{headers.get('host')}":
            refusal = {"error": "the status page answers only its own origin (Origin)"}
            return Reply(403, json.dumps(refusal).encode())
        if path == JSON_PATH:
            document = json.dumps(self.document(), separators=(",", ":")).encode()
            return Reply(200, document, headers=_HEADERS)
        body, kind = self._files[path]
        return Reply(200, body, kind, _HEADERS)

    def document(self) -> dict[str, object]:
        """What `page.json` answers now."""
        snapshot, taken = self._published
        return page_document(
            snapshot,
            age=max(0.0, self._clock() - taken),
            now_wall=self._wall(),
            pid=self._pid,
            started_wall=self._started_wall,
            series=self.samples.series,
        )
