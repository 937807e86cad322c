"""hpcenv: build and validate Python ML environments on heterogeneous HPC clusters.

The flow is facts -> profile -> plan -> build -> probes -> report; each stage is one
module named for it (docs/design.md maps where each concern lives).
Standard library only: target environments import ``hpcenv.kit`` through it.
"""

__version__ = "0.1.0"
