"""Crashes at every fault point, with real SIGKILLs, then recover: the invariants of docs/design.md §7."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from applyonce.faults import POINTS
from tests.conftest import Repo, make_repo, run_cli, stored_json
from tests.e2e.support import THREE_FILE_PATCH, assert_invariants

BAD_PATCH = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 7\n+VALUE = 8\n*** End Patch\n"
)
# after-snapshot is reached only with --dirty commit (tests/e2e/calls/test_dirty_commit.py).
# after-push-objects and during-catch-up only with --remote (tests/e2e/fleet/test_remote_publish.py).
# after-roll-forward only in recover (tests/e2e/git/test_commits_beside_calls.py).
COMMIT_POINTS = [
    p
    for p in POINTS
    if p
    not in (
        "after-reject-receipt-tmp",
        "after-snapshot",
        "after-push-objects",
        "during-catch-up",
        "after-roll-forward",
    )
]


def apply(repo: Repo, patch: str = THREE_FILE_PATCH, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_cli("apply", "-", "--repo", str(repo.path), "--json", *args, input=patch, env=env)


def crash_recover_repeat(repo: Repo, point: str) -> dict[str, object]:
    """Kill a call at ``point``, recover, repeat it: the repeat's receipt, once its commit is
    checked against the invariants and a second recover and a third apply changed nothing."""
    base = repo.head()
    crashed = apply(repo, env={"APPLYONCE_FAULT": point})
    assert crashed.returncode == -signal.SIGKILL
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stderr
    again = apply(repo)
    assert again.returncode == 0, again.stderr
    receipt: dict[str, object] = orjson.loads(again.stdout)
    assert receipt["output"] == (
        "Success. Updated the following files:\nM src/util.py\nA docs/notes.md\nD README.md\n"
    )
    assert_invariants(repo, base, str(receipt["call_id"]), committed=True)
    # Settled means settled: a second recover and a third apply change nothing.
    head = repo.head()
    assert "nothing to recover" in run_cli("recover", "--repo", str(repo.path)).stdout
    third = apply(repo)
    assert stored_json(third.stdout) == stored_json(again.stdout)
    assert repo.head() == head
    return receipt


# .ci/run kills at one point in six, others at the next commits (tests/conftest.py).
@pytest.mark.sampled(every=6)
@pytest.mark.parametrize("point", COMMIT_POINTS)
def test_crash_at_fault_point_then_recover_then_repeat(repo: Repo, point: str) -> None:
    crash_recover_repeat(repo, point)


def test_crash_while_writing_a_rejection(repo: Repo) -> None:
    base = repo.head()
    crashed = apply(repo, BAD_PATCH, env={"APPLYONCE_FAULT": "after-reject-receipt-tmp"})
    assert crashed.returncode == -signal.SIGKILL
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    again = apply(repo, BAD_PATCH)
    assert again.returncode == 1
    receipt = orjson.loads(again.stdout)
    assert receipt["error"]["kind"] == "hunk-mismatch"
    assert_invariants(repo, base, receipt["call_id"], committed=False)


@pytest.mark.parametrize("point", ["after-prepared", "after-publish", "after-ledger"])
def test_repeating_an_interrupted_call_recovers_it_first(repo: Repo, point: str) -> None:
    """No explicit recover: the repeated apply finds the dead claim and asks Git."""
    base = repo.head()
    assert apply(repo, env={"APPLYONCE_FAULT": point}).returncode == -signal.SIGKILL
    again = apply(repo)
    assert again.returncode == 0, again.stderr
    receipt = orjson.loads(again.stdout)
    # after-publish: the commit was found in Git; after-prepared: nothing had landed, so the call
    # ran again; after-ledger: the call was complete and its receipt is simply returned.
    assert receipt["reconciled"] is (point == "after-publish")
    assert_invariants(repo, base, receipt["call_id"], committed=True)


def test_reconciled_receipt_equals_what_the_original_would_have_written(
    repo: Repo, tmp_path: Path
) -> None:
    clean = make_repo(tmp_path / "clean", repo.files())
    expected = orjson.loads(apply(clean).stdout)
    assert apply(repo, env={"APPLYONCE_FAULT": "after-publish"}).returncode == -signal.SIGKILL
    run_cli("recover", "--repo", str(repo.path))
    receipt = orjson.loads(apply(repo).stdout)
    assert receipt["reconciled"] is True
    for key in ("call_id", "files", "match_levels", "output", "output_sha256", "args_sha256"):
        assert receipt[key] == expected[key], key


def test_recover_rolls_forward_an_unpublished_commit_object(repo: Repo) -> None:
    base = repo.head()
    assert apply(repo, env={"APPLYONCE_FAULT": "after-commit-object"}).returncode == -signal.SIGKILL
    assert repo.head() == base
    result = run_cli("recover", "--repo", str(repo.path))
    assert "published it now" in result.stdout
    assert repo.head() != base and len(repo.call_ids()) == 1


def test_recover_does_not_roll_forward_when_the_tip_moved(repo: Repo) -> None:
    base = repo.head()
    assert apply(repo, env={"APPLYONCE_FAULT": "after-commit-object"}).returncode == -signal.SIGKILL
    (repo.path / "other.txt").write_text("someone else\n")
    repo.git("add", "other.txt")
    repo.git("commit", "-q", "-m", "outside commit")
    result = run_cli("recover", "--repo", str(repo.path))
    assert "interrupted before the publish" in result.stdout
    assert repo.call_ids() == []
    # The call is retryable and lands on the new tip.
    again = apply(repo)
    assert again.returncode == 0, again.stderr
    assert repo.git("merge-base", "--is-ancestor", base, "HEAD", check=False) == ""
    assert len(repo.call_ids()) == 1


def test_recover_reports_unheld_git_locks_and_removes_none(repo: Repo) -> None:
    """Locks in the user's repository that applyonce cannot prove its own are reported when no
    process holds them open, and never removed (tests/e2e/git/test_git_locks.py has the rest)."""
    stale = repo.path / ".git" / "refs" / "heads" / "main.lock"
    stale.write_text("")
    old = time.time() - 60
    os.utime(stale, (old, old))
    held = repo.path / ".git" / "index.lock"
    held.write_text("")
    os.utime(held, (old, old))
    holder = subprocess.Popen(
        [sys.executable, "-c", f"f=open({str(held)!r}); import time; time.sleep(60)"]
    )
    try:
        time.sleep(0.5)
        result = run_cli("recover", "--repo", str(repo.path), "--json")
        report = orjson.loads(result.stdout)
        assert report["removed"] == []
        assert held.exists() and stale.exists()
        assert [n for n in report["notes"] if "Git lock file" in n] == [
            f"Git lock file {stale} is 1 min old; if no git command is running, remove it with rm {stale}"
        ]
    finally:
        holder.kill()
        holder.wait()


def test_recover_of_a_live_call_leaves_it_alone(repo: Repo) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "applyonce",
            "apply",
            "-",
            "--repo",
            str(repo.path),
            "--check",
            "sleep 3",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(THREE_FILE_PATCH.encode())
    proc.stdin.close()
    time.sleep(1.2)
    result = run_cli("recover", "--repo", str(repo.path))
    # Left alone, and said so: held by its live owner, not "every call is settled" (exit 4).
    assert result.returncode == 4, result.stderr
    assert f"  held       held by process {proc.pid} on " in result.stdout
    assert "every call is settled" not in result.stdout
    assert proc.wait(timeout=30) == 0
    assert len(repo.call_ids()) == 1


def test_two_recovers_and_an_apply_race(repo: Repo) -> None:
    base = repo.head()
    assert apply(repo, env={"APPLYONCE_FAULT": "after-publish"}).returncode == -signal.SIGKILL
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "applyonce", "recover", "--repo", str(repo.path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ),
        subprocess.Popen(
            [sys.executable, "-m", "applyonce", "recover", "--repo", str(repo.path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ),
        subprocess.Popen(
            [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path), "--json"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        ),
    ]
    procs[2].stdin.write(THREE_FILE_PATCH.encode())  # type: ignore[union-attr]
    procs[2].stdin.close()  # type: ignore[union-attr]
    codes = [p.wait(timeout=60) for p in procs]
    outputs = [p.stdout.read().decode() for p in procs[:2]]  # type: ignore[union-attr]
    # A recover that finds the call held by the other recover or the apply, still running, says
    # so and exits 4 (not "settled"); the one that holds it settles it.
    for code, out in zip(codes[:2], outputs, strict=True):
        assert code == 0 or (code == 4 and ("held" in out or "not everything is settled" in out)), (
            code,
            out,
        )
    assert codes[2] in (0, 4)
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    final = apply(repo)
    assert final.returncode == 0
    assert_invariants(repo, base, orjson.loads(final.stdout)["call_id"], committed=True)


def test_chaos_kills_from_outside(tmp_path: Path) -> None:
    """Distinct calls, each process SIGKILLed at a random moment; then recover and redo all."""
    rng = random.Random(20261202)
    count = 12
    repo = make_repo(tmp_path / "repo", {f"f{i}.txt": f"v0 {i}\n" for i in range(count)})
    base = repo.head()
    patches = [
        f"*** Begin Patch\n*** Update File: f{i}.txt\n@@\n-v0 {i}\n+v1 {i}\n"
        f"*** Add File: new/n{i}.txt\n+{i}\n*** End Patch\n"
        for i in range(count)
    ]
    for patch in patches:
        proc = subprocess.Popen(
            [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        proc.stdin.write(patch.encode())  # type: ignore[union-attr]
        proc.stdin.close()  # type: ignore[union-attr]
        time.sleep(rng.uniform(0.0, 0.45))
        proc.kill()
        proc.wait()
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    ids = []
    for patch in patches:
        result = apply(repo, patch)
        assert result.returncode == 0, result.stderr
        ids.append(orjson.loads(result.stdout)["call_id"])
    carried = repo.call_ids()
    assert sorted(carried) == sorted(ids)  # every call once: none lost, none twice
    assert repo.git("merge-base", "--is-ancestor", base, "HEAD", check=False) == ""
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
    assert repo.git("status", "--porcelain") == ""
    for i in range(count):
        assert (repo.path / f"f{i}.txt").read_text() == f"v1 {i}\n"


def test_reconciled_unified_diff_call_equals_the_original(tmp_path: Path) -> None:
    """The recorded patch text is re-parsed on recovery, so a format whose args dump drops details
    (here the line number that places a context-free hunk) still gets the receipt the original
    process would have written."""
    files = {"dup.txt": "a\nsame\nb\nsame\nc\n"}
    diff = "--- a/dup.txt\n+++ b/dup.txt\n@@ -4 +4 @@\n-same\n+changed\n"
    clean = make_repo(tmp_path / "clean", files)
    expected = orjson.loads(apply(clean, diff).stdout)
    assert (clean.path / "dup.txt").read_text() == "a\nsame\nb\nchanged\nc\n"
    repo = make_repo(tmp_path / "repo", files)
    assert apply(repo, diff, env={"APPLYONCE_FAULT": "after-publish"}).returncode == -signal.SIGKILL
    run_cli("recover", "--repo", str(repo.path))
    receipt = orjson.loads(apply(repo, diff).stdout)
    assert receipt["reconciled"] is True
    for key in ("call_id", "files", "match_levels", "output"):
        assert receipt[key] == expected[key], key
