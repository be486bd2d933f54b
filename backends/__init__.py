"""Agent backends: the backend protocol, the process helper and one module per agent CLI."""
