"""Collecting a node's facts: NVML, nvidia-smi, /proc, fi_info."""
