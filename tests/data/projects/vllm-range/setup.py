from setuptools import setup

setup(
    name="vllm-range",
    version="0.1.0",
    py_modules=[],
    python_requires=">=3.10",
    install_requires=["transformers>=4.40"],
    extras_require={"vllm": ["vllm>=0.8.5,<=0.12.0"]},
)
