from setuptools import find_packages, setup

setup(
    name="setup-extras",
    version="0.1.0",
    packages=find_packages(),
    python_requires=">=3.10",
    install_requires=["torch>=2.4", "numpy", "einops"],
    extras_require={
        "fa": ["flash-attn>=2.6"],
        "eval": ["scipy"],
    },
)
