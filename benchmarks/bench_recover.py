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

Beside each run, in the same run, its peers: the start of a process that imports recovery
(``python -c 'import applyonce.flow.recovery.recover'``: what recovery costs before it reads a
call), and the fsync floor: N small files written durably one after another in the same
directory (write, fsync, rename, then one fsync of the directory), as one receipt per call each
on its own would be.
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
    starts: list[float] = []
    floors: dict[int, list[float]] = {}
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
            starts.append(start_time())
            floors.setdefault(calls, []).append(fsync_floor(root, calls))
            print(
                f"recover of {calls} interrupted calls, run {run + 1}: {wall:.2f} s wall, "
                f"{cpu:.2f} s CPU; peers: import {starts[-1]:.2f} s, {calls} durable writes "
                f"{floors[calls][-1]:.2f} s; load average {os.getloadavg()[0]:.1f}"
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
    print("\n| peer, same run | wall median | spread (min-max) | N |\n|---|---|---|---|")
    print(
        f"| `python -c 'import applyonce.flow.recovery.recover'` | "
        f"{statistics.median(starts):.2f} s | {min(starts):.2f}-{max(starts):.2f} s | "
        f"{len(starts)} |"
    )
    for calls, values in floors.items():
        print(
            f"| fsync floor: {calls:,} small files written durably one by one | "
            f"{statistics.median(values):.2f} s | {min(values):.2f}-{max(values):.2f} s | "
            f"{len(values)} |"
        )


def start_time() -> float:
    """Wall seconds of a process that imports recovery and does nothing else."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import applyonce.flow.recovery.recover"], check=True)
    return time.perf_counter() - t0


def fsync_floor(root: Path, count: int) -> float:
    """Wall seconds to write ``count`` small files durably one by one (temp file, write,
    fsync, rename), then one fsync of their directory."""
    folder = root / "fsync-floor"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    data = b"x" * 1500  # about a receipt's size
    t0 = time.perf_counter()
    for i in range(count):
        tmp, final = folder / f".tmp-{i}", folder / f"{i}.json"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    wall = time.perf_counter() - t0
    shutil.rmtree(folder, ignore_errors=True)
    return wall


if __name__ == "__main__":
    main()
