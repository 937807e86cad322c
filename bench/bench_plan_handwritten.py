"""``hpcenv plan PROFILE --project P --json`` of a hand-written torch file, this tree's code
against a baseline revision's (``--baseline-rev``; default f12a805, main before the model
resolved a hand-written file) in the same rounds.

The model of a hand-written file judges its GPU packages from the file resolved as
written (``install_set._as_written``: the cached ``uv pip compile`` audit reads), where
the baseline judged them by name alone: this measures what that costs ``plan``.

Projects (tests/data/projects): ``torch_jax_uncompiled`` (``torch==2.9.1`` +
``jax[cuda13]==0.7.2``) and ``whisper`` (its requirements.txt), on the recorded V100
node's facts, a profile asking for any torch (as tests/integration/projects/
test_agreement.py does). The PyTorch index is unreachable here: the swapped compile of
both revisions fails fast the same way (``UV_HTTP_RETRIES=0``), and plan says so.

- ``cold``: an HPCENV_HOME emptied before each run (no cached resolution; uv's own cache
  warm after the warm-up round);
- ``warm``: an HPCENV_HOME kept between runs (the resolution read from hpcenv's cache).

Interleaved, ``--runs`` rounds after one warm-up round. Prints JSON with min/median/max
of each and the ratio of the medians to the baseline's. Usage: ``python
bench/bench_plan_handwritten.py [--runs N] [--baseline-rev REV]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from _timing import export_rev, summarize, timed_ok

REPO = Path(__file__).resolve().parents[1]
PROJECTS = ("torch_jax_uncompiled", "whisper")
FACTS = REPO / "tests" / "data" / "facts" / "v100-supercloud.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline-rev", default="f12a805")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-planhw-") as tmp:
        root = Path(tmp)
        profile = root / "anytorch.toml"
        text = (REPO / "envs" / "supercloud.toml").read_text()
        profile.write_text(text.replace('version = "==2.11.0"', 'version = ">=1.0"'))
        base = {**os.environ, "UV_HTTP_RETRIES": "0"}
        revs = {"this": None, args.baseline_rev: export_rev(args.baseline_rev, root / "rev")}
        samples: dict[str, list[float]] = {}
        for run in range(args.runs + 1):  # the first round warms uv's cache and the homes
            for project in PROJECTS:
                argv = [sys.executable, "-m", "hpcenv", "plan", str(profile), "--project",
                        str(REPO / "tests" / "data" / "projects" / project),
                        "--facts", str(FACTS), "--json"]  # fmt: skip
                for rev, src in revs.items():
                    env = {**base, **({"PYTHONPATH": str(src)} if src else {})}
                    for kind in ("cold", "warm"):
                        home = root / f"home-{rev}-{project}-{kind}"
                        if kind == "cold":
                            shutil.rmtree(home, ignore_errors=True)
                        took = timed_ok(argv, {**env, "HPCENV_HOME": str(home)})
                        if run:
                            samples.setdefault(f"{project} {kind} {rev}", []).append(took)
    out: dict[str, object] = {name: summarize(s) for name, s in samples.items()}
    med = {name: statistics.median(s) for name, s in samples.items()}
    for project in PROJECTS:
        for kind in ("cold", "warm"):
            this, then = med[f"{project} {kind} this"], med[f"{project} {kind} {args.baseline_rev}"]
            out[f"ratio {project} {kind} vs {args.baseline_rev}"] = this / then
    out["load_average"] = os.getloadavg()
    out["measured"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
