"""The user's Git locks are sacred: recover removes only the index.lock its journal proves its own,
never a lock of the user's git (even one nobody holds open), and a lock dated in the future never
makes it wait."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import APP_PATCH, Repo, apply, run_cli
from tests.conftest import UTIL_PATCH as PATCH

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")


def _commit_waiting_for_editor(repo: Repo, tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A real ``git commit`` sitting in its editor (index.lock taken, no descriptor open on it)."""
    go = tmp_path / "go"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\nwhile [ ! -e "{go}" ]; do sleep 0.05; done\necho msg > "$1"\n')
    editor.chmod(0o755)
    (repo.path / "mine.txt").write_text("mine\n")
    repo.git("add", "mine.txt")
    proc = subprocess.Popen(
        ["git", "-C", str(repo.path), "commit", "-q", "--", "mine.txt"],
        env={**os.environ, "GIT_EDITOR": str(editor)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lock = repo.path / ".git" / "index.lock"
    deadline = time.monotonic() + 10
    while not lock.exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    return proc, go


def test_recover_leaves_the_index_lock_of_a_commit_waiting_for_its_editor(
    repo: Repo, tmp_path: Path
) -> None:
    proc, go = _commit_waiting_for_editor(repo, tmp_path)
    lock = repo.path / ".git" / "index.lock"
    try:
        report = orjson.loads(run_cli("recover", "--repo", str(repo.path), "--json").stdout)
        assert lock.exists()
        assert str(lock) not in report["removed"]
        assert any(
            f"if no git command is running, remove it with rm {lock}" in n for n in report["notes"]
        ), report["notes"]
    finally:
        go.touch()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert repo.git("log", "-1", "--format=%s").strip() == "msg"
    assert repo.git("status", "--porcelain") == ""


def test_recover_reports_a_killed_writers_ref_lock_and_keeps_it(repo: Repo) -> None:
    """A lock libgit2 or git took cannot be attributed: it is reported with the command to remove
    it, never removed."""
    stale = repo.path / ".git" / "refs" / "heads" / "main.lock"
    stale.write_text("")
    old = time.time() - 600
    os.utime(stale, (old, old))
    result = run_cli("recover", "--repo", str(repo.path))
    assert result.returncode == 0, result.stderr
    assert stale.exists()
    assert f"Git lock file {stale} is 10 min old; if no git command is running" in result.stdout


def test_a_lock_dated_in_the_future_does_not_make_recover_wait(repo: Repo) -> None:
    """The clock was stepped back: the lock's mtime is an hour ahead."""
    lock = repo.path / ".git" / "index.lock"
    lock.write_text("")
    ahead = time.time() + 7200
    os.utime(lock, (ahead, ahead))
    scratch_lock = repo.state_dir() / "scratch" / "0" / ".git" / "index.lock"
    scratch_lock.parent.mkdir(parents=True)
    scratch_lock.write_text("")
    os.utime(scratch_lock, (ahead, ahead))
    started = time.monotonic()
    result = run_cli("recover", "--repo", str(repo.path), timeout=30)
    assert time.monotonic() - started < 10
    assert result.returncode == 0, result.stderr
    assert lock.exists()
    assert (
        f"Git lock file {lock} is dated 2 h in the future (was the clock set back?)"
        in result.stdout
    )


def test_kill_during_the_sync_then_recover_removes_its_own_index_lock_and_temp_files(
    repo: Repo,
) -> None:
    crashed = apply(repo, PATCH, env={"APPLYONCE_FAULT": "during-sync"})
    assert crashed.returncode == -signal.SIGKILL
    lock = repo.path / ".git" / "index.lock"
    assert lock.read_bytes().startswith(b"applyonce lock ")
    temps = list((repo.path / "src").glob(".applyonce-tmp-util.py.*"))
    assert len(temps) == 1
    report = orjson.loads(run_cli("recover", "--repo", str(repo.path), "--json").stdout)
    assert str(lock) in report["removed"] and str(temps[0]) in report["removed"]
    assert not lock.exists() and not temps[0].exists()
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""
    assert list((repo.state_dir() / "locks").iterdir()) == []


def test_the_next_call_clears_its_own_killed_syncs_index_lock_without_waiting(
    repo: Repo,
) -> None:
    """A clone whose sync was killed does not wait on that sync's index.lock at every later call
    (and leave each checkout for recover): the next sync, holding the sync lock every sync holds,
    knows the journaled holder dead and removes what it left, as recover would."""
    crashed = apply(repo, PATCH, env={"APPLYONCE_FAULT": "during-sync"})
    assert crashed.returncode == -signal.SIGKILL
    lock = repo.path / ".git" / "index.lock"
    assert lock.exists()
    started = time.monotonic()
    nxt = apply(repo, APP_PATCH)
    assert nxt.returncode == 0, nxt.stderr
    assert "checkout was not updated" not in nxt.stderr, nxt.stderr
    assert not lock.exists()
    assert not list((repo.path / "src").glob(".applyonce-tmp-*"))
    assert time.monotonic() - started < 3.0  # the bounded wait on a held lock is longer
    assert "return f'hello {name}!'" in (repo.path / "src/app.py").read_text()
    # The killed call's own sync is recover's (its row is unsynced); then all is clean.
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""


def test_recover_removes_its_own_index_lock_that_a_power_cut_left_empty(repo: Repo) -> None:
    """The marker written into index.lock is not fsynced: after a power cut the lock's name can
    stand with nothing in it. Made right after the journal entry, it is the dead sync's."""
    crashed = apply(repo, PATCH, env={"APPLYONCE_FAULT": "during-sync"})
    assert crashed.returncode == -signal.SIGKILL
    lock = repo.path / ".git" / "index.lock"
    lock.write_bytes(b"")  # what the disk kept of it
    report = orjson.loads(run_cli("recover", "--repo", str(repo.path), "--json").stdout)
    assert str(lock) in report["removed"] and not lock.exists()
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""
    assert list((repo.state_dir() / "locks").iterdir()) == []


def test_an_empty_index_lock_made_long_after_the_dead_syncs_entry_stays(repo: Repo) -> None:
    """An empty index.lock made a minute after the dead sync journaled its own is another git's
    (taken once the sync was dead): reported, never removed."""
    assert apply(repo, PATCH, env={"APPLYONCE_FAULT": "during-sync"}).returncode == -signal.SIGKILL
    lock = repo.path / ".git" / "index.lock"
    lock.write_bytes(b"")
    (entry,) = (repo.state_dir() / "locks").glob("*.json")
    then = time.time() - 60
    os.utime(entry, (then, then))
    report = orjson.loads(run_cli("recover", "--repo", str(repo.path), "--json").stdout)
    assert lock.exists() and str(lock) not in report["removed"]
    assert any(f"remove it with rm {lock}" in n for n in report["notes"]), report["notes"]


def test_recover_keeps_a_users_lock_where_its_killed_sync_had_one(
    repo: Repo, tmp_path: Path
) -> None:
    """The user removed the dead sync's index.lock and their git took it again: the journal names
    that path, but the content is not what applyonce wrote, so it stays."""
    assert apply(repo, PATCH, env={"APPLYONCE_FAULT": "during-sync"}).returncode == -signal.SIGKILL
    lock = repo.path / ".git" / "index.lock"
    lock.unlink()
    for tmp in (repo.path / "src").glob(".applyonce-tmp-*"):
        tmp.unlink()
    repo.git("checkout", "--", ".")
    proc, go = _commit_waiting_for_editor(repo, tmp_path)
    try:
        report = orjson.loads(run_cli("recover", "--repo", str(repo.path), "--json").stdout)
        assert lock.exists() and str(lock) not in report["removed"]
        assert any(n.startswith("checkout not updated") for n in report["notes"]), report
    finally:
        go.touch()
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""


def test_a_foreign_lock_left_over_gives_up_in_seconds_and_says_how_to_remove_it(
    repo: Repo,
) -> None:
    """Neither lock is applyonce's (not journaled): recover would only report it, so the error
    names the rm command, not recover; and a leftover lock costs seconds, not a dozen."""
    ref_lock = repo.path / ".git" / "refs" / "heads" / "main.lock"
    ref_lock.write_text("")
    head = repo.head()
    started = time.monotonic()
    result = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH)
    assert time.monotonic() - started < 6
    assert result.returncode == 4, result.stderr
    assert f"if no git command is running, remove it with rm {ref_lock}" in result.stderr
    assert "recover" not in result.stderr
    assert repo.head() == head and ref_lock.exists()
    ref_lock.unlink()
    index_lock = repo.path / ".git" / "index.lock"
    index_lock.write_text("")
    result = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH)
    assert result.returncode == 0, result.stderr
    assert "the checkout does not show this commit of main (it was not updated" in result.stdout
    assert f"if no git command is running, remove it with rm {index_lock}" in result.stdout
    assert index_lock.exists()
