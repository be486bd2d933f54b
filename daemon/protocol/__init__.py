"""The server protocol as the daemon speaks it: wire models, HTTP client, retries, circuit."""
