"""A user's own project: reading its dependencies, the torch swap, the audit."""
