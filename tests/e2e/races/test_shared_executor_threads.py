"""One Executor used by two threads at once.

A kept executor may serve calls from whichever thread (the ledger's connection does not refuse a
second thread), so its calls must not interleave their transactions on one connection, nor may
``PRAGMA synchronous`` toggled by one thread's deferred record apply to the other's durable one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.conftest import Repo, run_cli

CHILD = textwrap.dedent(
    """
    import sys, threading
    from applyonce.executor import Executor
    ex = Executor(sys.argv[1])
    errors, statuses = [], []
    def work(t):
        for i in range(6):
            patch = f"*** Begin Patch\\n*** Add File: t{t}/f{i}.txt\\n+{t} {i}\\n*** End Patch\\n"
            try:
                statuses.append(ex.apply(patch, tool_call_id=f"c{t}-{i}").status)
            except Exception as exc:
                errors.append(repr(exc))
    threads = [threading.Thread(target=work, args=(t,)) for t in range(2)]
    for th in threads: th.start()
    for th in threads: th.join()
    print(len(errors), statuses.count("committed"))
    for e in errors: print(e)
    """
)


def test_two_threads_sharing_one_executor_commit_every_call(repo: Repo, tmp_path: Path) -> None:
    # A hang (seen: both threads blocked for good) is a failure too: the timeout raises.
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(repo.path)],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    first, *rest = proc.stdout.splitlines()
    errors, committed = map(int, first.split())
    # Either the executor serialises its calls (all 12 commit) or it refuses a second thread
    # (sqlite3's same-thread check); never a ledger error in the middle of a call.
    assert all("thread" in line for line in rest), proc.stdout
    assert errors + committed == 12, proc.stdout
    repo.git("fsck", "--strict")
    # No receipt disagrees with the ledger (a call refused half way may be left to recover).
    audit = run_cli("audit", "--repo", str(repo.path))
    assert "tampered" not in audit.stdout, audit.stdout
