"""Recovery benchmark: ``applyonce recover`` of N interrupted calls, for several N.

    python3 benchmarks/bench_recover.py [--calls 100,1000,2000] [--runs 3] [--keep DIR]

For each N, the untimed setup child of bench_speed.py (benchmarks/speed_setup.py ``interrupt``)
makes a repository with a checkout (100 files) and N calls cut off at a fault point, a third each
after the publish, after the commit object and after 'prepared' (where ``APPLYONCE_FAULT``'s
SIGKILL would be, raising instead; every fsync off in that process; its claims are left to a dead
process, as after a kill). That repository is kept as a template (``--keep DIR`` reuses it); each
run copies it and times one real ``applyonce recover --json`` process, which settles every call
(checked: N outcomes, exit 0). Prints each run, then median and spread (min-max), and the time
per call, so that linearity can be read off.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from speed_setup import make_repo  # noqa: E402


def template(root: Path, calls: int) -> Path:
    repo = root / f"rec-{calls}.tpl"
    if (repo / ".git" / "applyonce" / "ledger.sqlite3").exists():
        return repo
    shutil.rmtree(repo, ignore_errors=True)
    make_repo(repo, 100, checkout=True)
    started = time.perf_counter()
    setup = [sys.executable, str(HERE / "speed_setup.py"), "interrupt", str(repo), str(calls)]
    subprocess.run(setup, check=True)
    print(f"made {calls} interrupted calls in {time.perf_counter() - started:.1f} s at {repo}")
    return repo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", default="100,1000,2000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="keep (and reuse) the templates here")
    ns = parser.parse_args()
    root = ns.keep or Path(tempfile.mkdtemp(prefix="applyonce-bench-recover-"))
    root.mkdir(parents=True, exist_ok=True)
    results: dict[int, list[float]] = {}
    cpus: dict[int, list[float]] = {}
    for calls in [int(n) for n in ns.calls.split(",")]:
        source = template(root, calls)
        for run in range(ns.runs):
            repo = root / f"rec-{calls}-run"
            shutil.rmtree(repo, ignore_errors=True)
            shutil.copytree(source, repo, symlinks=True)
            argv = [sys.executable, "-m", "applyonce", "recover", "--json", "-C", str(repo)]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t0 = time.perf_counter()
            proc = subprocess.run(argv, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            assert proc.returncode == 0, proc.stderr[-500:]
            outcomes = json.loads(proc.stdout)["outcomes"]
            assert len(outcomes) == calls, (len(outcomes), calls)
            results.setdefault(calls, []).append(wall)
            cpus.setdefault(calls, []).append(cpu)
            print(
                f"recover of {calls} interrupted calls, run {run + 1}: {wall:.2f} s wall, "
                f"{cpu:.2f} s CPU, load average {os.getloadavg()[0]:.1f}"
            )
            shutil.rmtree(repo, ignore_errors=True)
    print(
        "\n| interrupted calls | wall median | spread (min-max) | CPU median | CPU per call | N |"
        "\n|---|---|---|---|---|---|"
    )
    for calls, values in results.items():
        median, cpu = statistics.median(values), statistics.median(cpus[calls])
        print(
            f"| {calls:,} | {median:.2f} s | {min(values):.2f}-{max(values):.2f} s | "
            f"{cpu:.2f} s | {cpu / calls * 1000:.2f} ms | {len(values)} |"
        )


if __name__ == "__main__":
    main()
