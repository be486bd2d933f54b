"""What operators see: the health port and document, metrics, systemd notify."""
