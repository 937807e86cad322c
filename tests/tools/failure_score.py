"""Print the failure catalogue's score: ``hpcenv explain`` of every real failure log of
``tests/data/failures/index.toml`` against the cause its thread established, on the dev
logs (the catalogue was written from them), the holdout logs (kept out while it was
written), the blind logs (collected after it was written, by someone who never changed
it) and all, and every miss: ``python tests/tools/failure_score.py`` (``--split blind``
lists only that split's misses; ``--logs DIR`` scores another folder of logs with its own
index.toml, e.g. this set against another checkout's hpcenv on PYTHONPATH)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import failure_catalogue as fc

SPLITS = ("dev", "holdout", "blind")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=SPLITS, default="")
    parser.add_argument("--logs", type=Path, default=fc.FAILURES, help="a folder with index.toml")
    args = parser.parse_args()
    answers = [fc.explain(log) for log in fc.logs(args.logs)]
    for split in (*SPLITS, ""):
        right, wrong, total = fc.score(answers, split)
        if total:
            print(f"{split or 'all':8} {right:3}/{total:<3} right ({100 * right / total:.0f}%), "
                  f"{total - right - wrong} unknown, {wrong} with a wrong known cause")  # fmt: skip
    for a in answers:
        if not a.right and (not args.split or a.log.split == args.split):
            kind = "WRONG" if a.wrong else "miss"
            mark = " (known_wrong)" if a.log.known_wrong else ""
            print(f"{kind:5} {a.log.split:7} {a.log.id}: expected {a.log.expected}, "
                  f"got {a.got}{mark} | {a.evidence[:110]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
