"""The one subprocess wrapper (command) and the one uv caller (uv)."""
