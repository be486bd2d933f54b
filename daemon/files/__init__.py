"""Files the daemon writes for itself (owner-only, atomic), files it reads from places
another user or an agent could plant something (regular files only, never blocking, capped),
and the one way a root step touches an agent's tree (directory handles, beneath.py)."""
