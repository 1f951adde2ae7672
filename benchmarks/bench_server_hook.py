"""The server's guard (``applyonce hook pre-receive``) on a long branch: what one push costs it.

    python3 benchmarks/bench_server_hook.py [--commits N]

Builds a bare repository whose ``main`` has N commits (default 20,000), every other one carrying
a ``Call-Id`` trailer (git fast-import), then times, in-process, the check of a one-commit push
onto ``main``: with the branch's Call-Id index built from nothing (a first push, or after a
force push), and with the index at the branch's tip (every push after); then the same push as
git runs it, ``applyonce hook pre-receive`` in its own process; and, for comparison, the
``git log --format=%(trailers:key=Call-Id,valueonly)`` pass a hook without an index would make
each push. Never asserted in tests.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from applyonce.git.serverhook import INDEX_DIR, Update, check_push


def build(bare: Path, commits: int) -> str:
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    lines = ["blob", "mark :1", "data 2", "x", ""]
    for i in range(commits):
        call = hashlib.sha256(str(i).encode()).hexdigest()
        message = f"change {i}\n\nbody\n\nCall-Id: {call}\n" if i % 2 == 0 else f"human {i}\n"
        data = message.encode()
        lines += [
            "commit refs/heads/main",
            f"mark :{i + 2}",
            f"committer T <t@example.invalid> {1_700_000_000 + i} +0000",
            f"data {len(data)}",
            message,
        ]
        if i == 0:
            lines.append("M 100644 :1 a.txt")
        lines.append("")
    subprocess.run(
        ["git", "-C", str(bare), "fast-import", "--quiet"],
        input="\n".join(lines).encode(),
        check=True,
    )
    return git(bare, "rev-parse", "main")


def git(bare: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(bare), *args], capture_output=True, text=True)
    return done.stdout.strip()


def timed(fn: object) -> float:
    started = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=20_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-hook-"))
    try:
        bare = work / "long.git"
        tip = build(bare, args.commits)
        tree = git(bare, "rev-parse", "main^{tree}")
        new = git(bare, "commit-tree", "-p", tip, "-m", f"new\n\nCall-Id: {'e' * 64}", tree)
        push = [Update(tip, new, "refs/heads/main")]
        shutil.rmtree(bare / INDEX_DIR, ignore_errors=True)
        cold = timed(lambda: check_push(bare, push))
        warm = min(timed(lambda: check_push(bare, push)) for _ in range(5))
        env = {**os.environ, "GIT_DIR": str(bare)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        process = min(
            timed(
                lambda: subprocess.run(
                    [sys.executable, "-m", "applyonce", "hook", "pre-receive"],
                    input=f"{tip} {new} refs/heads/main\n",
                    text=True,
                    env=env,
                    check=True,
                )
            )
            for _ in range(3)
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / 3
        log = min(
            timed(
                lambda: subprocess.run(
                    ["git", "-C", str(bare), "log", "--format=%(trailers:key=Call-Id,valueonly)"],
                    capture_output=True,
                    check=True,
                )
            )
            for _ in range(3)
        )
        print(f"branch: {args.commits} commits, {(args.commits + 1) // 2} calls")
        print(f"check, index built from nothing: {cold * 1000:.0f} ms")
        print(f"check, index at the tip:         {warm * 1000:.1f} ms")
        print(
            f"hook process (python start-up included): {process * 1000:.0f} ms,"
            f" {cpu * 1000:.0f} ms of CPU"
        )
        print(f"git log trailer pass, for comparison:    {log * 1000:.0f} ms")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
