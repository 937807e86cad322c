"""hpcenv: build and validate Python ML environments on heterogeneous HPC clusters.

The flow is facts -> profile -> plan -> build -> probes -> report; each stage is one
module named for it (see DESIGN.md in the repository).
"""

__version__ = "0.1.0"
