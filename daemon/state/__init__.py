"""What the daemon keeps on disk in its state directory: the outbox and the running-agent record."""
