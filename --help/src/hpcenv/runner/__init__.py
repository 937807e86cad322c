"""Running probes in a target environment and gathering their results."""
