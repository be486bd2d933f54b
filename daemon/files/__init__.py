"""Files the daemon writes for itself: owner-only, atomic (`private`). Files in places an
agent or another user can write are the boundary's (daemon/boundary/)."""
