"""Regenerating the knowledge data from the artifacts (hpcenv knowledge update/check)."""
