"""The Oh-My-Pi backend: `omp -p --mode json`, Pi's command line and events under its own name.

Oh-My-Pi is a fork of Pi that kept Pi's print mode and JSON events, so Multica's daemon runs
it with Pi's backend and registers it as a runtime of its own (`omp`); so does this one
(`backends.pi`): the same arguments, the same parser, the prompt on stdin, sessions resumed
by id from the task's directory. Only the executable, the name on errors and usage, the
session markers and the model catalog (`omp models --json`, `backends.omp.models`) differ. Its
project skills go to `.omp/skills/`.
"""

from __future__ import annotations

import re

from backends.models import Catalog
from backends.omp.models import omp_models
from backends.pi.backend import PiBackend
from backends.pi.events import PiEventParser

# What `omp --session ID` says (stderr, exit 1) when it has no such session (18.2.3).
_SESSION_MISSING = re.compile(r'Session "[^"]*" not found')


class OmpEventParser(PiEventParser):
    """Pi's event parser, naming Oh-My-Pi in errors and on the usage."""

    cli = "omp"
    provider = "omp"

    def says_session_missing(self, text: str) -> bool:
        """Whether `text` is omp saying the session to resume does not exist."""
        return _SESSION_MISSING.search(text) is not None


class OmpBackend(PiBackend):
    """Runs Oh-My-Pi for a task; resumes sessions and falls back when one is gone."""

    name = "omp"
    min_version = ""
    tested_max = ""
    session_markers = frozenset({"PI_CODING_AGENT", "OMP_CODING_AGENT"})

    async def models(self) -> Catalog:
        """The models `omp models --json` lists (`backends.omp.models`), not Pi's RPC."""
        return await omp_models(self)

    def parser(self, model: str, resume: str) -> OmpEventParser:
        """A parser for one run's output."""
        return OmpEventParser(model, resume, self.version, self.tested_max)
