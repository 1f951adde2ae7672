"""Patch-engine benchmark: one hunk at the end of a 200,000-line file.

    python3 benchmarks/bench_patch.py [--lines N] [--repeat R]

Reports the best and median wall time of parse + apply in-process (no Git, no disk), and the same
hunk matched at each fuzzy level of the ladder (the worst case: every earlier level scans the whole
file first). Never asserted in tests; docs/performance.md quotes its output.
"""

from __future__ import annotations

import argparse
import statistics
import time

from applyonce.patch import apply_hunks, parse


def _time(fn, repeat: int) -> list[float]:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - start)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    ns = parser.parse_args()
    n = ns.lines
    lines = [f"    value_{i} = compute({i}, 'x')  " if i % 3 else f"def f_{i}():" for i in range(n)]
    data = ("\n".join(lines) + "\n").encode()
    tail = lines[-3:]
    cases = {
        "exact": [f" {tail[0]}", f"-{tail[1]}", "+    replaced = True", f" {tail[2]}"],
        "rstrip": [
            f" {tail[0].rstrip()}",
            f"-{tail[1].rstrip()}",
            "+    replaced = True",
            f" {tail[2].rstrip()}",
        ],
        "strip": [
            f" {tail[0].strip()}",
            f"-{tail[1].strip()}",
            "+replaced = True",
            f" {tail[2].strip()}",
        ],
    }
    print(f"file: {n:,} lines, {len(data) / 1e6:.1f} MB; hunk: last 3 lines; {ns.repeat} runs each")
    for level, body in cases.items():
        text = (
            "*** Begin Patch\n*** Update File: big.py\n@@\n" + "\n".join(body) + "\n*** End Patch\n"
        )

        def run(text: str = text, level: str = level) -> None:
            patch = parse(text)
            _, levels = apply_hunks(data, patch.operations[0].hunks, path="big.py")
            assert levels[0].label == level, levels

        runs = _time(run, ns.repeat)
        print(
            f"  parse + apply, matched at {level:<6}: best {min(runs) * 1000:7.1f} ms, "
            f"median {statistics.median(runs) * 1000:7.1f} ms"
        )


if __name__ == "__main__":
    main()
