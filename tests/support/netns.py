"""A probe run in a network namespace with only the loopback (Ray's and the orphans' tests)."""

from __future__ import annotations

import os
import shutil
import subprocess

#: ``sh -c`` script: bring up lo in the new namespace, then exec the probe's argv
#: (passed as arguments, never spliced into the script).
LOOPBACK_ONLY = 'ip link set lo up && exec "$0" "$@"'


def can_unshare_net() -> bool:
    if os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("ip")):
        return False
    probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
    return probe.returncode == 0
