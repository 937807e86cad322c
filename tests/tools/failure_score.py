"""Print the failure catalogue's score: ``hpcenv explain`` of every real failure log of
``tests/data/failures/index.toml`` against the cause its thread established, on the dev
logs (the catalogue was written from them), the holdout logs (kept out while it was
written) and all, and every miss: ``python tests/tools/failure_score.py`` (``--split
holdout`` lists only that split's misses)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from support import failure_catalogue as fc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "holdout"), default="")
    args = parser.parse_args()
    answers = [fc.explain(log) for log in fc.logs()]
    for split in ("dev", "holdout", ""):
        right, wrong, total = fc.score(answers, split)
        print(f"{split or 'all':8} {right:3}/{total:<3} right ({100 * right / total:.0f}%), "
              f"{wrong} with a wrong known cause, {total - right - wrong} not named")  # fmt: skip
    for a in answers:
        if not a.right and (not args.split or a.log.split == args.split):
            kind = "WRONG" if a.wrong else "miss"
            print(f"{kind:5} {a.log.split:7} {a.log.id}: expected {a.log.expected}, "
                  f"got {a.got} | {a.evidence[:110]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
