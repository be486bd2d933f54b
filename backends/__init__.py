"""Agent backends: the protocol, the shared parts, the process helper, a folder per agent CLI."""
