"""Files the daemon writes for itself (owner-only, atomic) and files it reads from places
another user or an agent could plant something (regular files only, never blocking, capped)."""
