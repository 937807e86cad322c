"""The user's own job: its environment (env/run) and the preflight checks."""
