"""Group commit: durable calls/s and latency, one caller vs 8, beside the fsync floor, one run.

    python3 benchmarks/bench_group.py [--runs 3] [--calls 96] [--callers 1,8] [--window 0]

On a 1k-file checkout (``speed_setup.make_repo``), one branch, one :class:`Executor` shared by
N threads (the resident server's case and the Python API's): each thread sends ``--calls / N``
calls, each adding a file of its own in a folder of its own, one after the other. Reported per
caller count: calls/s (all calls over the wall time) and each call's latency (p50, p95), median
of ``--runs`` runs and their spread (min-max); the process's CPU time a call; the groups the
calls went in (the branch's reflog: one entry a group); and the fsync floor of the same file
system in the same run: write 100 B + fsync + rename + fsync of the folder, per second.
``--window`` (seconds): the executor's ``group_window`` (default 0: a group is what queued while
the calls before it ran).

Never asserted in tests (timings on a shared machine are indicative; tests count system calls and
writes instead: tests/flow/test_group_commit.py, tests/state/test_fsync_discipline.py).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from speed_setup import ENV, git, machine, make_repo

FILES = 1000


def _patch(thread: int, k: int, tag: str) -> str:
    return f"*** Begin Patch\n*** Add File: c{thread}/{tag}-{k}.txt\n+{tag} {k}\n*** End Patch\n"


def run_callers(repo: Path, callers: int, calls: int, window: float, tag: str) -> dict[str, float]:
    """``calls`` calls from ``callers`` threads on one Executor: calls/s, p50/p95 latency (ms),
    the number of ref moves (groups)."""
    from applyonce import Executor
    from applyonce.flow.options import CallOptions

    per = calls // callers
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    moves_before = len(git("-C", repo, "reflog", "show", "refs/heads/main").splitlines())
    with Executor(repo, group_window=window) as executor:
        executor.apply(_patch(0, -1, tag + "warm"))  # the ledger and receipts opened

        def work(thread: int) -> None:
            for k in range(per):
                started = time.perf_counter()
                try:
                    outcome = executor.call(_patch(thread, k, tag), CallOptions())
                    status = outcome.receipt.status
                except Exception as exc:
                    status = repr(exc)
                took = time.perf_counter() - started
                with lock:
                    latencies.append(took)
                    if status != "committed":
                        errors.append(status)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(callers)]
        started, cpu = time.perf_counter(), time.process_time()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
    if errors:
        raise SystemExit(f"{len(errors)} calls did not commit: {errors[:3]}")
    moves = len(git("-C", repo, "reflog", "show", "refs/heads/main").splitlines()) - moves_before
    latencies.sort()
    return {
        "rate": len(latencies) / wall,
        "p50": 1000 * latencies[len(latencies) // 2],
        "p95": 1000 * latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))],
        "groups": moves - 1,  # less the warm-up call
        "cpu": 1000 * cpu / len(latencies),
    }


def fsync_floor(where: Path, count: int = 200) -> float:
    """Durable small-file replaces per second: write 100 B, fsync, rename, fsync the folder."""
    where.mkdir(parents=True, exist_ok=True)
    dir_fd = os.open(where, os.O_RDONLY)
    try:
        started = time.perf_counter()
        for k in range(count):
            tmp = where / f"tmp{k % 4}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, b"x" * 100)
            os.fsync(fd)
            os.close(fd)
            os.rename(tmp, where / f"f{k % 4}")
            os.fsync(dir_fd)
        return count / (time.perf_counter() - started)
    finally:
        os.close(dir_fd)


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--calls", type=int, default=96)
    parser.add_argument("--callers", default="1,8")
    parser.add_argument("--window", type=float, default=0.0)
    options = parser.parse_args()
    os.environ.update(ENV)
    callers = [int(c) for c in options.callers.split(",")]
    root = Path(tempfile.mkdtemp(prefix="applyonce-group-"))
    try:
        repo = make_repo(root / "ck-1000", FILES, checkout=True)
        results: dict[int, list[dict[str, float]]] = {n: [] for n in callers}
        floors: list[float] = []
        started = time.perf_counter()
        for run in range(options.runs):
            for n in callers:  # interleaved: each run sees the same machine for every row
                results[n].append(
                    run_callers(repo, n, options.calls, options.window, f"r{run}n{n}")
                )
            floors.append(fsync_floor(root / "floor"))
        print(f"# group commit: {options.runs} runs, median (min-max)\n")
        for line in machine(root):
            print(line)
        print()
        print(f"{options.calls} calls a run, 1k-file checkout, one branch, one Executor.\n")
        print("| callers | calls/s | p50 ms | p95 ms | CPU ms a call | groups a run |")
        print("|---|---|---|---|---|---|")
        for n in callers:
            cells = [_spread([r[key] for r in results[n]]) for key in ("rate", "p50", "p95", "cpu")]
            groups = _spread([r["groups"] for r in results[n]])
            print(f"| {n} | {' | '.join(cells)} | {groups} |")
        print(f"| fsync floor (write+fsync+rename+dir fsync) | {_spread(floors)} | | | | |")
        print(f"\ntook {time.perf_counter() - started:.0f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
