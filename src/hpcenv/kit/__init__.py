"""The probe kit: what probe scripts import inside the *target* environment, and what
hpcenv imports too, so each helper and each fact is read one way.

Rule for every module in this package: **standard library only, Python >= 3.10, and no
import of an hpcenv module outside ``hpcenv.kit``** (``tests/unit/kit/test_kit_package.py``
checks it).
A target environment has its own packages and must not see hpcenv's (rich, packaging,
nvidia-ml-py) nor the rest of hpcenv: the runner puts a directory holding only
``hpcenv/__init__.py`` and ``hpcenv/kit/`` first on the probes' ``PYTHONPATH``
(``hpcenv.utils.paths.kit_path``). ``hpcenv/__init__.py`` therefore stays stdlib-only too.

- ``status``: the one ``Status`` and its combine rule;
- ``probe``: the probe side of the runner protocol (rank, config, checks, result files);
- ``registry``: every probe and its properties (the one list);
- ``children``: child processes that die with their parent (PDEATHSIG);
- ``slurm_env``: the ``SLURM_*`` variables a job step sees;
- ``nvidia_proc``: the NVIDIA driver and GPUs from /proc (no NVML, no subprocess);
- ``netplugin``: the NCCL net plugin NCCL would open;
- ``libfabric``: ``fi_info -l`` and its parsing;
- ``nccl`` / ``nccl_log``: NCCL version numbers; what NCCL's INFO log says;
- ``versions``: release ranges as the probes' tables write them;
- ``ports``: a free TCP port;
- ``masking``: what a secret is and masking it in text (``hpcenv.utils.redact`` builds on it;
  probes mask the rank files they write);
- ``elf``: one ELF reader (sections, ``.dynamic``: NEEDED/RUNPATH/RPATH/SONAME,
  exported dynamic symbols), through ``mmap``;
- ``fatbin``: the GPU code in a library's fatbinary sections (SASS and PTX per
  compute capability), without a CUDA toolkit, a GPU or importing the library;
- ``coverage``: the one rule for "does this code run on a GPU of compute capability X.Y".
"""
