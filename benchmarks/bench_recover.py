"""Recovery benchmark: ``applyonce recover`` on a repo with N interrupted calls.

    python3 benchmarks/bench_recover.py [--calls 1000]

Builds a repo, then leaves N calls interrupted the way crashes leave them, spread evenly over three
kinds: killed after the publish (commit on the branch, receipt still 'prepared'), killed after the
commit object was written but before the publish (rolled forward or rejected), and killed after
'prepared' (nothing staged). The calls are produced in-process with the fault point raising instead
of killing, then their claims are handed to a dead pid, which is exactly the state a SIGKILL
leaves. Then one real ``applyonce recover`` process is timed, and audit checks the result.
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import applyonce.flow.call.apply as apply_module
import applyonce.flow.record.settle as settle_module
from applyonce import Executor


class Crash(BaseException):
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    ns = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="applyonce-bench-recover-"))
    repo = root / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README.md").write_text("bench\n")
    env = {
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@x",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@x",
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "base"], check=True, env=env)

    kinds = ["after-publish", "after-commit-object", "after-prepared"]
    armed = {"point": ""}

    def fault(point: str) -> None:
        if point == armed["point"]:
            raise Crash(point)

    # In-process stand-in for the SIGKILL of APPLYONCE_FAULT.
    apply_module.fault = settle_module.fault = fault
    started = time.perf_counter()
    ex = Executor(repo)
    for i in range(ns.calls):
        armed["point"] = kinds[i % 3]
        patch = f"*** Begin Patch\n*** Add File: calls/c{i:05d}.txt\n+call {i}\n*** End Patch\n"
        with contextlib.suppress(Crash):
            ex.apply(patch)
    ex.ledger.db.execute("UPDATE calls SET owner_pid = 4194000, owner_start = '1'")
    ex.close()
    print(f"prepared {ns.calls} interrupted calls in {time.perf_counter() - started:.1f} s")

    t0 = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "applyonce", "recover", "--repo", str(repo), "--json"],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - t0
    import orjson

    report = orjson.loads(result.stdout)
    outcomes: dict[str, int] = {}
    for outcome in report["outcomes"]:
        outcomes[outcome["now"]] = outcomes.get(outcome["now"], 0) + 1
    print(f"applyonce recover: {elapsed:.2f} s for {ns.calls} interrupted calls -> {outcomes}")
    audit = subprocess.run(
        [sys.executable, "-m", "applyonce", "audit", "--repo", str(repo)],
        capture_output=True,
        text=True,
    )
    print(f"audit after recover: exit {audit.returncode}: {audit.stdout.strip().splitlines()[-1]}")
    print(f"(repo left at {root})")


if __name__ == "__main__":
    main()
