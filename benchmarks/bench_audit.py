"""Audit benchmark: ``applyonce audit`` of N trailer commits, whole and incremental, beside
``git log --format='%(trailers)'`` on the same commits, in the same run.

    python3 benchmarks/bench_audit.py [--calls 10000] [--runs 3] [--repo DIR]

Builds (or reuses, with --repo) a bare repository with N committed calls, one small added file
each, made by the untimed setup child of bench_speed.py (benchmarks/speed_setup.py, every fsync
off: what audit reads is the same, only its durability was not waited for): N commits with
applyonce's trailers, N receipts, N ledger rows. Then, ``--runs`` times each, in turn:

* ``git log --format='%(trailers)' main`` (the peer);
* ``applyonce audit --full`` (the whole history, every receipt verified against its commit);
* one more call (untimed, a real process), then ``applyonce audit``: the checkpoint the previous
  audit recorded is verified against Git and the ledger, and only the new commit is checked.

Each is a fresh process; wall seconds are printed per run, then median and spread (min-max).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from speed_setup import ENV, make_repo  # noqa: E402


def build(repo: Path, calls: int) -> None:
    make_repo(repo, 100, checkout=False)
    started = time.perf_counter()
    setup = [sys.executable, str(HERE / "speed_setup.py"), "calls", str(repo), str(calls)]
    subprocess.run(setup, check=True)
    print(f"made {calls} committed calls in {time.perf_counter() - started:.0f} s at {repo}")


def timed(argv: list[str], expect: str | None = None) -> float:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    assert proc.returncode == 0, (argv, proc.stdout[-500:], proc.stderr[-500:])
    assert expect is None or expect in proc.stdout, (expect, proc.stdout)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repo", type=Path, help="reuse (or make) the repository here")
    ns = parser.parse_args()
    repo = ns.repo or Path(tempfile.mkdtemp(prefix="applyonce-bench-audit-")) / "repo.git"
    if not (repo / "bench-built").exists():
        build(repo, ns.calls)
    env = {**os.environ, **ENV}
    applyonce = [sys.executable, "-m", "applyonce"]
    commits = int(subprocess.check_output(["git", "-C", str(repo), "rev-list", "--count", "main"]))
    log = ["git", "-C", str(repo), "log", "--format=%(trailers)", "main"]
    full = [*applyonce, "audit", "-C", str(repo), "--full"]
    incremental = [*applyonce, "audit", "-C", str(repo)]
    timed(log)  # warm the page cache for both
    timed(full)
    rows: dict[str, list[float]] = {"log": [], "full": [], "incremental": []}
    for run in range(ns.runs):
        rows["log"].append(timed(log))
        rows["full"].append(timed(full))
        # One more call (untimed), then an audit from the previous audit's checkpoint.
        patch = (
            f"*** Begin Patch\n*** Add File: more/r{time.time_ns()}.txt\n+{run}\n*** End Patch\n"
        )
        made = subprocess.run(
            [*applyonce, "apply", "-C", str(repo), "-"], input=patch, text=True, env=env
        )
        assert made.returncode == 0
        rows["incremental"].append(timed(incremental, expect="checked 1 new Call-Id commit(s)"))
        print(
            f"run {run + 1}: git log {rows['log'][-1] * 1000:.0f} ms, audit --full "
            f"{rows['full'][-1] * 1000:.0f} ms, audit after 1 new call "
            f"{rows['incremental'][-1] * 1000:.0f} ms"
        )
    names = {
        "log": f"`git log --format='%(trailers)' main`, {commits:,} commits",
        "full": f"`applyonce audit --full`, {commits:,} commits (whole history)",
        "incremental": "`applyonce audit` after 1 new call (checkpoint verified, 1 commit checked)",
    }
    print("\n| what | median | spread (min-max) | N |\n|---|---|---|---|")
    for key, values in rows.items():
        print(
            f"| {names[key]} | {statistics.median(values) * 1000:.0f} ms | "
            f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f} ms | {len(values)} |"
        )
    ratio = statistics.median(rows["full"]) / statistics.median(rows["log"])
    print(f"\naudit --full / git log (medians): {ratio:.1f}x")


if __name__ == "__main__":
    main()
