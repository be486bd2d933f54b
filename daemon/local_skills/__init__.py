"""A runtime's CLI as its user set it up on this machine: user-level skills and MCP servers.

inventory.py reads them (standard library only: it also runs alone, as the agent user);
reader.py runs it for a runtime — in the daemon for the daemon's own user, as a child of the
agent user's identity otherwise — bounded; disabled.py hides the skills an agent has turned off.
"""
