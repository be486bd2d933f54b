"""What the daemon keeps in its state directory: the lock, the outbox, agent records, incidents."""
