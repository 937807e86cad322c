"""Frozen data, no I/O: the facts of a node, the plan, probe results."""
