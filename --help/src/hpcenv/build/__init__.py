"""The side effects of a build: venvs, lockfiles, the flash-attn build, fixes, checks."""
