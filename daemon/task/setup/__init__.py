"""What a task's agent is given before it starts: place on disk, prompt, brief, env, skills."""
