"""One claimed task's run: the agent attempt, the drain and watchdog, the outcome and its report."""
