"""A publish SIGKILLed inside libgit2's ref update leaves ``refs/heads/<branch>.lock``; recover
proves it applyonce's (journaled before libgit2 took it) and removes it, so the next apply
succeeds. A lock of the user's on a branch is never removed.

No fault point can fire inside libgit2, so the publish is made to stop there for real: libgit2
appends the branch's reflog, then HEAD's, while it holds the ref lock (refdb_fs.c
``refdb_fs_backend__write_tail``: lock, compare, reflogs, then write the new oid and rename).
With ``logs/HEAD`` a FIFO, its ``open`` blocks until a reader comes: the process sits inside
libgit2 with the lock taken and empty, and is SIGKILLed there.
"""

from __future__ import annotations

import os
import random
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from applyonce.state.lockjournal import stale_lock_hint
from tests.conftest import APP_PATCH, Repo, run_cli
from tests.conftest import UTIL_PATCH as PATCH

pytestmark = pytest.mark.sampled(every=2, by="module")


def _git_locks(repo: Repo) -> set[Path]:
    return {p for p in (repo.path / ".git").rglob("*.lock") if "applyonce" not in p.parts}


def _publish_killed_inside_libgit2(repo: Repo) -> str:
    """Run an apply until libgit2 holds the branch's lock, SIGKILL it; returns the commit it was
    publishing (from the branch's reflog line libgit2 appended under the lock)."""
    head_log = repo.path / ".git" / "logs" / "HEAD"
    saved = head_log.read_bytes()
    head_log.unlink()
    os.mkfifo(head_log)
    lock = repo.path / ".git" / "refs" / "heads" / "main.lock"
    proc = subprocess.Popen(
        [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(PATCH.encode())
        proc.stdin.close()
        branch_log = repo.path / ".git" / "logs" / "refs" / "heads" / "main"
        deadline = time.monotonic() + 20
        while not (lock.exists() and b"applyonce: " in branch_log.read_bytes()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        time.sleep(0.1)  # the reflog line is written: now blocked opening logs/HEAD
        assert proc.poll() is None
        # Journaled before libgit2 took it, private like all of applyonce's state.
        # (Beside the entries of the call's kept packs: tests/git/test_housekeeping.py, and of
        # the checkout's index.lock, held across the publish.)
        records = {
            e: orjson.loads(e.read_bytes()) for e in (repo.state_dir() / "locks").glob("*.json")
        }
        (entry,) = [e for e, record in records.items() if record.get("kind") == "ref"]
        assert records[entry]["lock"] == str(lock)
        assert stat.S_IMODE(entry.stat().st_mode) == 0o600
        index_lock = str(repo.path / ".git" / "index.lock")
        assert [r["lock"] for r in records.values() if r["lock"].endswith("index.lock")] == [
            index_lock
        ]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        head_log.unlink()
        head_log.write_bytes(saved)
    assert lock.read_bytes() == b""  # what libgit2 left
    return branch_log.read_text().splitlines()[-1].split()[1]


@pytest.mark.parametrize("leftover", ["as libgit2 left it", "filled"])
def test_kill_inside_libgit2s_ref_update_then_recover_removes_its_lock(
    repo: Repo, leftover: str
) -> None:
    base = repo.head()
    new = _publish_killed_inside_libgit2(repo)
    lock = repo.path / ".git" / "refs" / "heads" / "main.lock"
    if leftover == "filled":
        # Killed a moment later: libgit2 had written the lock (one write of the new oid and a
        # newline, refdb_fs.c loose_commit) and not yet renamed it.
        lock.write_bytes(f"{new}\n".encode())
    assert repo.head() == base
    # What an apply that finds this lock taken says: recover removes it (it is journaled).
    assert "run 'applyonce recover'" in stale_lock_hint(repo.state_dir() / "locks", lock)
    assert "rm " in stale_lock_hint(repo.state_dir() / "locks", lock.with_name("x.lock"))
    recovered = run_cli("recover", "--repo", str(repo.path), "--json")
    assert recovered.returncode == 0, recovered.stderr
    report = orjson.loads(recovered.stdout)
    assert str(lock) in report["removed"]
    assert not any(str(lock) in note for note in report["notes"]), report["notes"]
    assert _git_locks(repo) == set()
    assert list((repo.state_dir() / "locks").iterdir()) == []
    assert repo.head() == new  # the staged commit, published by recover
    assert repo.git("status", "--porcelain") == ""
    if leftover == "as libgit2 left it":
        again = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=APP_PATCH)
        assert again.returncode == 0, again.stderr
        assert orjson.loads(again.stdout)["status"] == "committed"


def _add(i: int) -> str:
    return f"*** Begin Patch\n*** Add File: stress/f{i}.txt\n+{i}\n*** End Patch\n"


def test_random_sigkills_of_applies_then_recover_leaves_no_applyonce_lock_and_every_users(
    repo: Repo,
) -> None:
    """Applies racing for the branch, SIGKILLed at random times; the user's own ref locks (a
    foreign ``other.lock``, then a ``git update-ref --stdin`` transaction held prepared on the
    branch itself) are reported, never removed."""
    heads = repo.path / ".git" / "refs" / "heads"
    other_lock = heads / "other.lock"
    other_lock.write_text("the user's own lock\n")
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    running: list[tuple[subprocess.Popen[bytes], float]] = []
    outcomes: list[int] = []
    started = time.monotonic()
    for i in range(30):
        proc = subprocess.Popen(
            [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert proc.stdin is not None
        proc.stdin.write(_add(i).encode())
        proc.stdin.close()
        running.append((proc, time.monotonic() + rng.uniform(0.05, 1.5)))
        time.sleep(0.1)
        running = _kill_due(running, outcomes, time.monotonic())
    while running:
        time.sleep(0.02)
        running = _kill_due(running, outcomes, time.monotonic())
    assert time.monotonic() - started < 20
    assert outcomes.count(-signal.SIGKILL) >= 5, (seed, outcomes)  # most, on a loaded machine

    recovered = run_cli("recover", "--repo", str(repo.path), "--json")
    assert recovered.returncode == 0, (seed, recovered.stderr)
    report = orjson.loads(recovered.stdout)
    assert _git_locks(repo) == {other_lock}, (seed, report)
    assert other_lock.read_text() == "the user's own lock\n"
    assert any(f"rm {other_lock}" in note for note in report["notes"]), report["notes"]
    assert list((repo.state_dir() / "locks").glob("*.json")) == []
    again = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=_add(99))
    assert again.returncode == 0, (seed, again.stderr)
    assert orjson.loads(again.stdout)["status"] == "committed"

    # The user's transaction on the branch, prepared and held open: its lock holds their new
    # value, and no process has it open.
    tip, parent = repo.head(), repo.git("rev-parse", "HEAD~1").strip()
    txn = subprocess.Popen(
        ["git", "-C", str(repo.path), "update-ref", "--stdin"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert txn.stdin is not None and txn.stdout is not None
    txn.stdin.write(f"start\nupdate refs/heads/main {parent} {tip}\nprepare\n")
    txn.stdin.flush()
    assert [txn.stdout.readline(), txn.stdout.readline()] == ["start: ok\n", "prepare: ok\n"]
    main_lock = heads / "main.lock"
    try:
        assert main_lock.read_text() == f"{parent}\n"
        report = orjson.loads(run_cli("recover", "--repo", str(repo.path), "--json").stdout)
        assert str(main_lock) not in report["removed"]
        assert main_lock.read_text() == f"{parent}\n"
        assert any(f"rm {main_lock}" in note for note in report["notes"]), report["notes"]
    finally:
        txn.stdin.write("abort\n")
        txn.stdin.close()
        assert txn.wait(timeout=10) == 0
    assert not main_lock.exists() and repo.head() == tip
    repo.git("fsck", "--no-dangling")


def _kill_due(
    running: list[tuple[subprocess.Popen[bytes], float]], outcomes: list[int], now: float
) -> list[tuple[subprocess.Popen[bytes], float]]:
    left = []
    for proc, due in running:
        if proc.poll() is None and now < due:
            left.append((proc, due))
            continue
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        outcomes.append(proc.wait(timeout=10))
    return left
