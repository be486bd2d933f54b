"""The embedded reference server: the Multica daemon protocol over SQLite."""

from daemon.server.app import create_app
from daemon.server.serve import running_server, serve
from daemon.server.store import Store

__all__ = ["Store", "create_app", "running_server", "serve"]
