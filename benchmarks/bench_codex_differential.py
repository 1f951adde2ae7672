"""Differential run: applyonce's Codex ``apply_patch`` against the real Codex binary.

    python3 benchmarks/bench_codex_differential.py [--seeds 0:3000] [--show K] [--bin PATH]

Each seed (see ``tests/peers/codex_differential.py``) makes a random tree and a model-style Codex
patch, applies it with the real binary and with applyonce, and checks both results against the
oracle.
Prints the counts: agree, differ-explained (per documented switch), findings (undocumented
differences the oracle models, per switch), refusals where Codex is right (applyonce refused the
hunks' places, Codex applied the patch and put every hunk where the generator took it from: a
disagreement), unexplained (the first K in full), and the wall time.
Never asserted in tests.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.peers.codex_differential import PENDING, SWITCHES, find_codex_binary, run_case


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seeds", default="0:3000", help="START:STOP (STOP excluded)")
    parser.add_argument("--show", type=int, default=3, help="unexplained cases to print in full")
    parser.add_argument("--bin", default=None, help="the codex binary (default: as the test)")
    ns = parser.parse_args()
    start, stop = (int(part) for part in ns.seeds.split(":"))
    binary = ns.bin or find_codex_binary()
    if binary is None:
        print("no Codex binary: set APPLYONCE_CODEX_BIN or run .ci/run", file=sys.stderr)
        return 2
    verdicts: Counter[str] = Counter()
    per_switch: Counter[str] = Counter()
    findings: list[int] = []
    unexplained: list[int] = []
    wrong: list[int] = []
    codex_failed = ours_failed = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aocodex-") as top:
        for seed in range(start, stop):
            case = run_case(seed, binary=binary, workdir=Path(top))
            verdicts[case.verdict] += 1
            codex_failed += not case.codex.ok
            ours_failed += not case.applyonce.ok
            if case.verdict in ("explained", "finding"):
                per_switch.update(case.switches)
            if case.verdict == "finding":
                findings.append(seed)
            if case.codex_right:
                wrong.append(seed)
            if case.verdict == "unexplained":
                unexplained.append(seed)
                if len(unexplained) <= ns.show:
                    print(case.describe(), end="\n\n")
    elapsed = time.perf_counter() - started
    total = stop - start
    print(
        f"{total} cases (seeds {start}:{stop}; Codex failed {codex_failed}, "
        f"applyonce refused {ours_failed})"
    )
    print(f"  agree:             {verdicts['agree']}")
    print(f"  differ, explained: {verdicts['explained']}  (a case can need several switches)")
    for name in SWITCHES:
        print(f"    {name:26} {per_switch[name]}")
    print(f"  findings (undocumented, modelled): {verdicts['finding']}  seeds {findings[:20]}")
    for name in PENDING:
        print(f"    {name:26} {per_switch[name]}")
    print(
        f"  disagree, refused where Codex is right: {len(wrong)}  seeds {wrong[:40]}  (of them "
        f"explained: {verdicts['refused-codex-right']}; applyonce refused the hunks' places, Codex "
        "put each where it was made for)"
    )
    print(f"  unexplained:       {verdicts['unexplained']}  seeds {unexplained[:40]}")
    print(f"  {elapsed:.1f} s, {elapsed / max(total, 1) * 1000:.1f} ms a case")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
