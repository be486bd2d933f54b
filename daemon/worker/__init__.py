"""The worker and its own parts: claiming, registration, token renewal, the summary line."""
