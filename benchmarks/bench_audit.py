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
import resource
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


CPU: dict[str, list[float]] = {}


def timed(argv: list[str], expect: str | None = None, key: str = "") -> float:
    """Wall seconds of ``argv`` (its CPU seconds, user + system, into ``CPU[key]``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    CPU.setdefault(key, []).append(cpu)
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
        rows["log"].append(timed(log, key="log"))
        rows["full"].append(timed(full, key="full"))
        # One more call (untimed), then an audit from the previous audit's checkpoint.
        patch = (
            f"*** Begin Patch\n*** Add File: more/r{time.time_ns()}.txt\n+{run}\n*** End Patch\n"
        )
        made = subprocess.run(
            [*applyonce, "apply", "-C", str(repo), "-"], input=patch, text=True, env=env
        )
        assert made.returncode == 0
        rows["incremental"].append(
            timed(incremental, "checked 1 new Call-Id commit(s)", "incremental")
        )
        print(
            f"run {run + 1}: git log {rows['log'][-1] * 1000:.0f} ms, audit --full "
            f"{rows['full'][-1] * 1000:.0f} ms, audit after 1 new call "
            f"{rows['incremental'][-1] * 1000:.0f} ms (load average {os.getloadavg()[0]:.1f})"
        )
    names = {
        "log": f"`git log --format='%(trailers)' main`, {commits:,} commits",
        "full": f"`applyonce audit --full`, {commits:,} commits (whole history)",
        "incremental": "`applyonce audit` after 1 new call (checkpoint verified, 1 commit checked)",
    }
    print("\n| what | wall median | spread (min-max) | CPU median | N |\n|---|---|---|---|---|")
    for key, values in rows.items():
        print(
            f"| {names[key]} | {statistics.median(values) * 1000:.0f} ms | "
            f"{min(values) * 1000:.0f}-{max(values) * 1000:.0f} ms | "
            f"{statistics.median(CPU[key]) * 1000:.0f} ms | {len(values)} |"
        )
    for what, top in (("--full", "full"), ("after 1 new call", "incremental")):
        wall = statistics.median(rows[top]) / statistics.median(rows["log"])
        cpu = statistics.median(CPU[top]) / statistics.median(CPU["log"])
        print(f"audit {what} / git log (medians): {wall:.1f}x wall, {cpu:.1f}x CPU")


if __name__ == "__main__":
    main()
