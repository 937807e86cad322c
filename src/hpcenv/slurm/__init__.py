"""Everything hpcenv does with SLURM, in one package.

- ``allocation``: the job this process runs in (``SLURM_*`` variables), its hosts
  (``scontrol show hostnames`` or ``hostlist``), and how many ranks go where;
- ``hostlist``: SLURM's compressed node lists (``nid[001-004]``) expanded;
- ``walltime``: SLURM time limits (``--time``) in seconds;
- ``srun``: the launcher that starts a probe's ranks with one ``srun``;
- ``sbatch``: job scripts' ``#SBATCH`` lines, written, submitted and waited for (what
  runs in them is rendered by ``hpcenv.job``, which hands the job here as data);
- ``steps``: a job script's SLURM steps (``on_nodes``, the command's srun, the chain);
- ``ray_cluster``: a Ray cluster over the allocation for the ray probe
  (``python -m hpcenv.slurm.ray_cluster``);
- ``pairs``: the bad-node finder (allreduce between pairs of nodes, which to exclude).

Nothing is imported here: ``hpcenv.profile.schema`` imports ``walltime`` while ``sbatch``
imports the profile.
"""
