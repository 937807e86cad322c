"""hpcenv's kit: readers that also run inside *target* environments.

Rule for every module in this package: **standard library only, Python >= 3.10, and no
import of an hpcenv module outside ``hpcenv.kit``.** Probe scripts run by a target
environment's Python (which has none of hpcenv's dependencies: no rich, no packaging)
import these modules, and hpcenv itself uses the same code, so a fact is read one way.

- ``elf``: one ELF reader (sections, ``.dynamic``: NEEDED/RUNPATH/RPATH/SONAME,
  exported dynamic symbols), through ``mmap``.
- ``fatbin``: the GPU code in a library's fatbinary sections (SASS and PTX per
  compute capability), without a CUDA toolkit, a GPU or importing the library.
- ``coverage``: the one rule for "does this code run on a GPU of compute capability X.Y".
"""
