"""agent-daemon: runs coding-agent CLIs for a task server, with a tool-aware idle watchdog."""

import sys

__version__ = "0.1.0"

# httpx imports its own command-line client on import when `click` is installed (it is: uvicorn
# needs it), and with it click and pygments: 1.6 MB the daemon never uses. None in sys.modules
# makes that import fail at once, and httpx falls back to its stub (`httpx.main`).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
