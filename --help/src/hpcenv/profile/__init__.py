"""The cluster profile: its schema and loading."""
