"""Audit benchmark: ``applyonce audit`` of N trailer commits beside ``git log`` of their trailers.

    python3 benchmarks/bench_audit.py [--calls 10000] [--runs 3] [--repo DIR]

Builds (or reuses, with --repo) a bare repository with N committed calls, one small added file
each, made in-process by an Executor: N commits with applyonce's trailers, N receipts, N ledger
rows. The setup switches durability off (fsync, the receipts directory's scan for stale temp
files) and the checkout sync (a bare repository has no checkout): what audit reads is the same,
only made faster. Then it times, in turn, each of ``--runs`` real ``applyonce audit`` processes
and ``git log --format='%(trailers)'`` on the same branch, and prints wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build(repo: Path, calls: int) -> None:
    import pygit2

    import applyonce.flow.call.apply as apply_module
    import applyonce.state.receipts as receipts_module
    from applyonce import Executor

    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(repo)], check=True)
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="b",
        GIT_AUTHOR_EMAIL="b@x",
        GIT_COMMITTER_NAME="b",
        GIT_COMMITTER_EMAIL="b@x",
    )
    run = {"capture_output": True, "check": True, "env": env}
    tree = subprocess.run(["git", "-C", str(repo), "mktree"], input=b"", **run).stdout.strip()
    base = (
        subprocess.run(["git", "-C", str(repo), "commit-tree", tree.decode(), "-m", "base"], **run)
        .stdout.decode()
        .strip()
    )
    subprocess.run(["git", "-C", str(repo), "update-ref", "refs/heads/main", base], check=True)
    # The setup only: what audit reads does not depend on how durably it was written.
    os.fsync = lambda fd: None
    pygit2.settings.enable_fsync_gitdir(False)
    receipts_module.stale_temp_files = lambda *a, **k: []  # type: ignore[attr-defined]
    apply_module.sync_after_publish = lambda ctx, receipt: []  # type: ignore[assignment]
    started = time.perf_counter()
    executor = Executor(repo)
    for i in range(calls):
        path = f"d{i % 100:02d}/c{i:05d}.txt"
        executor.apply(f"*** Begin Patch\n*** Add File: {path}\n+call {i}\n*** End Patch\n")
    executor.close()
    subprocess.run(["git", "-C", str(repo), "gc", "-q"], check=True)
    print(f"made {calls} committed calls in {time.perf_counter() - started:.0f} s at {repo}")


def timed(argv: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) of the child, exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    code = subprocess.run(argv, stdout=subprocess.DEVNULL).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repo", type=Path, help="reuse (or make) the repository here")
    ns = parser.parse_args()
    repo = ns.repo or Path(tempfile.mkdtemp(prefix="applyonce-bench-audit-")) / "repo.git"
    if not repo.exists():
        build(repo, ns.calls)
    audit = [sys.executable, "-m", "applyonce", "audit", "--repo", str(repo), "--branch", "main"]
    log = ["git", "-C", str(repo), "log", "--format=%(trailers)", "main"]
    for _ in range(ns.runs):
        for name, argv in (("applyonce audit", audit), ("git log --format='%(trailers)'", log)):
            wall, cpu, code = timed(argv)
            print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU (exit {code})")


if __name__ == "__main__":
    main()
