"""agent-daemon: runs coding-agent CLIs for a task server, with a tool-aware idle watchdog."""

__version__ = "0.1.0"
