"""Differential run: applyonce's pure engine against the real ``git apply`` on N seeded cases.

    python3 benchmarks/bench_differential.py [--cases N] [--start SEED] [--drift] [--show K]

Each case (see ``tests/peers/differential.py``) diffs random edits of random files with the real
``git diff`` and applies the patch with ``git apply`` and with applyonce's ``parse`` + ``plan``, on
the exact base (default) or on a drifted one (``--drift``: lines inserted and deleted first, so
hunks sit away from their line numbers). Prints ``N cases, M agree``, the differences by design, the
disagreements (the first K in full), and the wall time. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.peers.differential import run_case


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--drift", action="store_true", help="apply to a drifted base")
    parser.add_argument("--show", type=int, default=3, help="disagreements to print in full")
    ns = parser.parse_args()
    verdicts: Counter[str] = Counter()
    git_failed = 0
    shown = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aodiff-") as top:
        for seed in range(ns.start, ns.start + ns.cases):
            case = run_case(seed, drift=ns.drift, workdir=Path(top))
            verdicts[case.verdict] += 1
            git_failed += case.git.tree is None
            if case.verdict == "disagree":
                print(f"DISAGREE seed {seed}")
                if shown < ns.show:
                    shown += 1
                    print(case.describe())
    elapsed = time.perf_counter() - started
    base = "drifted base" if ns.drift else "exact base"
    print(
        f"{ns.cases} cases, {verdicts['agree']} agree ({base}, seeds {ns.start}.."
        f"{ns.start + ns.cases - 1}; git apply refused {git_failed})"
    )
    for verdict in ("lenient", "context-less", "eof-marker"):
        if verdicts[verdict]:
            print(f"  by design: {verdicts[verdict]} {verdict}")
    if verdicts["git-misread"]:
        print(f"  git apply misread git's own diff, applyonce did not: {verdicts['git-misread']}")
    print(f"  disagree: {verdicts['disagree']}")
    print(f"  {elapsed:.1f} s, {elapsed / ns.cases * 1000:.1f} ms a case")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
