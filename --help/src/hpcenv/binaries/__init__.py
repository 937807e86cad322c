"""GPU code in binaries (archs) and one CUDA major per venv (cudalibs)."""
