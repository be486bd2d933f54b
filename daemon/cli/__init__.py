"""The `agent-daemon` command and what only it uses: discovery, status view, task API."""
