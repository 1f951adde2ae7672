"""A ``git commit`` of the user's that runs beside a call never undoes it.

``git commit`` reads the branch's tip, then takes ``index.lock``, builds the tree from the index
and moves the branch by compare-and-swap against the tip it read. A call that moved the branch
(its publish, the local branch following a remote's, a catch-up, recover's roll forward) and
took ``index.lock`` only for the sync after it left a gap: a ``git commit`` that started there
read the call's commit, found the index still holding the files as they were before it, and
committed them — the call undone, ``audit`` clean, the call's "Success" unchanged. So the
checkouts' ``index.lock`` is held from before the branch moves until the sync has written the
index, as git holds it. A process killed in between leaves that lock (journaled, so ``recover``
and the next call remove it): the user's ``git commit`` then fails, and undoes nothing.

Each test kills the process in that gap for real (``APPLYONCE_FAULT``), then runs a real ``git
commit -am`` in the checkout, as the user would; the last one runs calls beside a real ``git
commit`` loop.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.conftest import APP_PATCH, UTIL_PATCH, Repo, Served, apply, make_repo, run_cli
from tests.e2e.support import THREE_FILE_PATCH, apply_remote, assert_invariants, server_calls

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

LOCK_TAKEN = "index.lock': File exists."


def user_commit(
    repo: Repo, message: str = "the user's commit", path: str = "README.md"
) -> subprocess.CompletedProcess[str]:
    """The user's ``git commit -am`` of an edit of theirs (to ``path``), as a real git."""
    edited = repo.path / path
    if "mine" not in edited.read_text():
        edited.write_text(edited.read_text() + "# mine\n")
    return subprocess.run(
        ["git", "-C", str(repo.path), "commit", "-q", "-am", message],
        capture_output=True,
        text=True,
    )


def changed_by(repo: Repo, commit: str) -> list[str]:
    return repo.git("show", "--format=", "--name-only", commit).split()


def blob(repo: Repo, rev: str, path: str) -> str:
    return repo.git("show", f"{rev}:{path}")


@pytest.mark.parametrize("point", ["after-publish", "after-receipt", "after-ledger"])
def test_a_commit_after_the_publish_fails_on_the_held_lock_until_recover(
    repo: Repo, point: str
) -> None:
    base = repo.head()
    crashed = apply(repo, UTIL_PATCH, env={"APPLYONCE_FAULT": point})
    assert crashed.returncode == -signal.SIGKILL
    call = repo.head()
    assert call != base and blob(repo, call, "src/util.py") == "VALUE = 2\n"
    # The branch moved and the checkout was not synced: the index still holds VALUE = 1. A
    # commit from it now would undo the call; the lock the killed call held stops it.
    lock = repo.path / ".git" / "index.lock"
    assert lock.read_bytes().startswith(b"applyonce lock ")
    refused = user_commit(repo)
    assert refused.returncode == 128, refused.stderr
    assert LOCK_TAKEN in refused.stderr
    assert repo.head() == call
    # recover removes the lock it proves its own, and syncs the checkout.
    report = orjson.loads(run_cli("recover", "--repo", str(repo.path), "--json").stdout)
    assert str(lock) in report["removed"]
    assert not lock.exists()
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == " M README.md\n"
    # The user's commit now holds their change alone, on top of the call.
    done = user_commit(repo)
    assert done.returncode == 0, done.stderr
    assert repo.git("rev-parse", "HEAD~1").strip() == call
    assert changed_by(repo, "HEAD") == ["README.md"]
    assert blob(repo, "HEAD", "src/util.py") == "VALUE = 2\n"


def test_the_next_call_removes_the_killed_calls_lock_and_syncs_its_files(repo: Repo) -> None:
    """Not only recover: the next call knows the journaled holder dead, removes its lock and
    brings the checkout up to the branch before it runs."""
    crashed = apply(repo, UTIL_PATCH, env={"APPLYONCE_FAULT": "after-publish"})
    assert crashed.returncode == -signal.SIGKILL
    lock = repo.path / ".git" / "index.lock"
    assert lock.exists()
    nxt = apply(repo, APP_PATCH)
    assert nxt.returncode == 0, nxt.stderr
    assert (
        nxt.stdout == "Success. Updated the following files:\nM src/app.py\nA tests/test_app.py\n"
    )
    assert not lock.exists()
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""
    done = user_commit(repo)
    assert done.returncode == 0, done.stderr
    assert changed_by(repo, "HEAD") == ["README.md"]
    assert blob(repo, "HEAD", "src/util.py") == "VALUE = 2\n"


def test_a_revert_holds_the_lock_across_its_publish_too(repo: Repo) -> None:
    first = apply(repo, UTIL_PATCH, "--json")
    assert first.returncode == 0, first.stderr
    call_id = orjson.loads(first.stdout)["call_id"]
    crashed = run_cli(
        "revert", call_id, "--repo", str(repo.path), env={"APPLYONCE_FAULT": "after-publish"}
    )
    assert crashed.returncode == -signal.SIGKILL
    reverted = repo.head()
    assert blob(repo, reverted, "src/util.py") == "VALUE = 1\n"
    refused = user_commit(repo)
    assert refused.returncode == 128 and LOCK_TAKEN in refused.stderr, refused.stderr
    assert repo.head() == reverted
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    done = user_commit(repo)
    assert done.returncode == 0, done.stderr
    assert changed_by(repo, "HEAD") == ["README.md"]
    assert blob(repo, "HEAD", "src/util.py") == "VALUE = 1\n"


def test_recovers_roll_forward_holds_the_lock_across_its_publish(repo: Repo) -> None:
    base = repo.head()
    staged = run_cli(
        "apply", "-", "--repo", str(repo.path), "--json",
        input=THREE_FILE_PATCH, env={"APPLYONCE_FAULT": "after-commit-object"},
    )  # fmt: skip
    assert staged.returncode == -signal.SIGKILL
    assert repo.head() == base
    killed = run_cli(
        "recover", "--repo", str(repo.path), env={"APPLYONCE_FAULT": "after-roll-forward"}
    )
    assert killed.returncode == -signal.SIGKILL
    rolled = repo.head()
    assert rolled != base and blob(repo, rolled, "src/util.py") == "VALUE = 2\n"
    refused = user_commit(repo, path="src/app.py")  # (the call deletes README.md)
    assert refused.returncode == 128 and LOCK_TAKEN in refused.stderr, refused.stderr
    assert repo.head() == rolled
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    again = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=THREE_FILE_PATCH)
    assert again.returncode == 0, again.stderr
    assert repo.head() == rolled
    assert repo.git("status", "--porcelain") == " M src/app.py\n"
    done = user_commit(repo, path="src/app.py")
    assert done.returncode == 0, done.stderr
    assert changed_by(repo, "HEAD") == ["src/app.py"]
    assert repo.git("rev-parse", "HEAD~1").strip() == rolled
    # The call itself is as the crash matrix wants it.
    repo.git("reset", "-q", "--hard", rolled)
    assert_invariants(repo, base, orjson.loads(again.stdout)["call_id"], committed=True)


def test_a_checkout_the_users_git_holds_is_not_waited_for_and_its_commit_fails(
    repo: Repo, tmp_path: Path
) -> None:
    """A ``git commit`` that holds ``index.lock`` (in its editor) read the tip before the
    publish: the call publishes after a short wait, and that commit's own move of the branch
    fails, undoing nothing; the checkout is said to be behind until recover."""
    go = tmp_path / "go"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\nwhile [ ! -e "{go}" ]; do sleep 0.05; done\necho mine > "$1"\n')
    editor.chmod(0o755)
    (repo.path / "README.md").write_text("# demo\nmine\n")
    proc = subprocess.Popen(
        ["git", "-C", str(repo.path), "commit", "-q", "-a"],
        env={**os.environ, "GIT_EDITOR": str(editor)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lock = repo.path / ".git" / "index.lock"
    try:
        while not lock.exists():
            assert proc.poll() is None
        done = apply(repo, UTIL_PATCH)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Success. Updated the following files:\nM src/util.py\n")
        assert "note: the checkout does not show this commit of main" in done.stdout
    finally:
        go.touch()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128
    assert "cannot lock ref 'HEAD'" in err
    call = repo.head()
    assert blob(repo, call, "src/util.py") == "VALUE = 2\n"
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert repo.git("status", "--porcelain") == " M README.md\n"


def test_a_remote_calls_local_branch_follows_only_under_the_held_lock(served: Served) -> None:
    """With a remote as the commit point, the checked-out local branch is not moved by the
    publish: it follows in the sync, under the lock. Killed in between, the local branch is
    where the checkout is, so the user's commit is their change alone (the call is the remote's,
    pulled as any)."""
    clone = served.clone
    base = clone.head()
    killed = apply_remote(clone, UTIL_PATCH, env={"APPLYONCE_FAULT": "after-publish"})
    assert killed.returncode == -signal.SIGKILL
    assert len(server_calls(served)) == 1
    remote_tip = served.server_git("rev-parse", "main").strip()
    assert clone.head() == base
    done = user_commit(clone)
    assert done.returncode == 0, done.stderr
    assert changed_by(clone, "HEAD") == ["README.md"]
    assert served.server_git("show", "main:src/util.py") == "VALUE = 2\n"
    clone.git("pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    assert clone.git("merge-base", "--is-ancestor", remote_tip, "HEAD", check=False) == ""
    assert blob(clone, "HEAD", "src/util.py") == "VALUE = 2\n"


def test_a_remote_call_killed_before_its_sync_leaves_the_lock_once_the_branch_followed(
    served: Served,
) -> None:
    clone = served.clone
    killed = apply_remote(clone, UTIL_PATCH, env={"APPLYONCE_FAULT": "during-sync"})
    assert killed.returncode == -signal.SIGKILL
    remote_tip = served.server_git("rev-parse", "main").strip()
    assert clone.head() == remote_tip  # followed, under the lock
    refused = user_commit(clone)
    assert refused.returncode == 128 and LOCK_TAKEN in refused.stderr, refused.stderr
    recovered = run_cli("recover", "--repo", str(clone.path), "--remote", "origin")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    done = user_commit(clone)
    assert done.returncode == 0, done.stderr
    assert changed_by(clone, "HEAD") == ["README.md"]
    assert blob(clone, "HEAD", "src/util.py") == "VALUE = 2\n"


def test_a_catch_up_holds_the_lock_across_the_local_branchs_move(
    served: Served, tmp_path: Path
) -> None:
    """Another clone's call moved the remote's branch; this clone's next call moves its
    checked-out branch up to it first, and syncs the files: killed in between, the lock it holds
    keeps the user's commit from undoing the other clone's call."""
    other = served.another_clone(tmp_path / "other")
    assert apply_remote(served.clone, UTIL_PATCH).returncode == 0
    theirs = served.server_git("rev-parse", "main").strip()
    killed = apply_remote(other, APP_PATCH, env={"APPLYONCE_FAULT": "during-catch-up"})
    assert killed.returncode == -signal.SIGKILL
    assert other.head() == theirs
    refused = user_commit(other)
    assert refused.returncode == 128 and LOCK_TAKEN in refused.stderr, refused.stderr
    assert other.head() == theirs
    recovered = run_cli("recover", "--repo", str(other.path), "--remote", "origin")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    done = user_commit(other)
    assert done.returncode == 0, done.stderr
    assert changed_by(other, "HEAD") == ["README.md"]
    assert blob(other, "HEAD", "src/util.py") == "VALUE = 2\n"


USER_LOOP = """
import pathlib, subprocess, sys, time
root, stop = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
n = 0
while not stop.exists():
    n += 1
    with open(root / "user.txt", "a") as f:
        f.write(f"{n}\\n")
    subprocess.run(["git", "-C", str(root), "commit", "-q", "-am", f"user {n}"], capture_output=True)
    time.sleep(0.03)
"""


@pytest.mark.slow
def test_no_call_is_lost_beside_a_git_commit_loop(tmp_path: Path) -> None:
    """The user commits every few tens of milliseconds while calls run one after another: each
    call lands and stays (before the lock was held across the publish, a few in forty were
    undone by a commit that started in the gap)."""
    calls = 20
    repo = make_repo(
        tmp_path / "repo", {"user.txt": "u\n", **{f"f{i}.txt": "base\n" for i in range(calls)}}
    )
    stop = tmp_path / "stop"
    loop = subprocess.Popen([sys.executable, "-c", USER_LOOP, str(repo.path), str(stop)])
    try:
        for i in range(calls):
            patch = (
                f"*** Begin Patch\n*** Update File: f{i}.txt\n@@\n-base\n+call {i}\n*** End Patch\n"
            )
            done = apply(repo, patch)
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith("Success."), done.stdout
    finally:
        stop.touch()
        loop.wait(timeout=30)
    lost = [i for i in range(calls) if blob(repo, "main", f"f{i}.txt") != f"call {i}\n"]
    assert lost == []
    users = repo.git("log", "--format=%s", "--grep=^user ", "main").split("\n")
    assert len(users) > calls  # the loop did commit beside the calls
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
