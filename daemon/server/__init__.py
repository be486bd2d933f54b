"""The embedded reference server: the Multica daemon protocol over SQLite.

Import its modules directly (`daemon.server.serve`, `daemon.server.store`, ...): the package
imports nothing itself, so the token file (`daemon.server.token`) costs a daemon talking to a
remote server none of the server's libraries.
"""
