"""Errors, every file read and written (fsio), where files go, the build's file lock,
secret masking."""
