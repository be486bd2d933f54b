"""The embedded reference server: the Multica daemon protocol over SQLite."""
