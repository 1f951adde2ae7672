"""The Call-Id search on a history that is not all here (a shallow clone): it never answers "not
on the branch" from it. A remote's publisher makes the clone complete from the remote first; the
repository's own branch, with nowhere to ask, refuses; the index never keeps a scan of the
shallow history as the scan of the deepened one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from applyonce.git.history import CallIdIndex, HistoryIncompleteError, MemoryHistoryCache
from applyonce.git.publisher import LocalRefPublisher
from applyonce.git.remote import RemotePublisher
from applyonce.git.store import GitStore
from tests.conftest import Repo, Served, make_repo

MAIN = "refs/heads/main"
CALL = "c" * 64


def commit_on(repo: Repo, name: str, call: str | None = None) -> str:
    """A commit on the checked-out main (a Call-Id trailer when ``call``)."""
    message = f"{name}\n\nCall-Id: {call}\n" if call else name
    repo.git("commit", "-q", "--allow-empty", "-m", message)
    return repo.head()


def shallow_clone(url: str, into: Path, *more: str) -> Repo:
    subprocess.run(["git", "clone", "-q", "--depth", "1", *more, url, str(into)], check=True)
    return Repo(into)


def test_a_shallow_clone_finds_a_call_landed_below_its_boundary_on_the_remote(
    served: Served, tmp_path: Path
) -> None:
    other = served.another_clone(tmp_path / "other")
    landed = commit_on(other, "a call", CALL)
    commit_on(other, "after it")
    other.git("push", "-q", "origin", "main")
    clone = shallow_clone(served.url, tmp_path / "shallow")
    assert (clone.path / ".git" / "shallow").exists()
    store = GitStore(clone.path)
    publisher = RemotePublisher(store, "origin", CallIdIndex(store, MemoryHistoryCache))
    assert publisher.landed(MAIN, CALL) == [landed]
    # Made complete from the remote, as 'git fetch --unshallow' would.
    assert not (clone.path / ".git" / "shallow").exists()
    assert publisher.landed(MAIN, "d" * 64) == []


def test_a_deepened_clone_is_made_complete_too(served: Served, tmp_path: Path) -> None:
    other = served.another_clone(tmp_path / "other")
    landed = commit_on(other, "a call", CALL)
    for n in range(3):
        commit_on(other, f"after it {n}")
    other.git("push", "-q", "origin", "main")
    clone = shallow_clone(served.url, tmp_path / "shallow")
    clone.git("fetch", "-q", "--deepen", "1")  # deeper, still above the call
    store = GitStore(clone.path)
    publisher = RemotePublisher(store, "origin", CallIdIndex(store, MemoryHistoryCache))
    assert publisher.landed(MAIN, CALL) == [landed]


def _origin_with_a_call(tmp_path: Path) -> tuple[Repo, str]:
    origin = make_repo(tmp_path / "origin", {"a.txt": "a\n"})
    landed = commit_on(origin, "a call", CALL)
    commit_on(origin, "after it")
    return origin, landed


def test_the_own_branch_of_a_shallow_clone_never_answers_not_here(tmp_path: Path) -> None:
    origin, _ = _origin_with_a_call(tmp_path)
    clone = shallow_clone(f"file://{origin.path}", tmp_path / "shallow")
    store = GitStore(clone.path)
    publisher = LocalRefPublisher(store, CallIdIndex(store, MemoryHistoryCache))
    with pytest.raises(HistoryIncompleteError) as refused:
        publisher.landed(MAIN, CALL)
    assert refused.value.exit_code == 4
    assert "shallow clone" in refused.value.message
    assert "git fetch --unshallow" in refused.value.hint
    # A range that is all here is answered: nothing after the tip.
    assert publisher.landed(MAIN, CALL, since=clone.head()) == []
    with pytest.raises(HistoryIncompleteError):
        publisher.landed(MAIN, CALL, since="e" * 40)  # not here: the whole branch


def test_the_index_scans_again_once_the_clone_is_deepened(tmp_path: Path) -> None:
    """A scan of the shallow history says "scanned up to the tip"; after 'git fetch
    --unshallow' the tip is the same, and the commits below the old boundary are new: they are
    scanned, and the call found (not answered "not here" from the old scan)."""
    origin, landed = _origin_with_a_call(tmp_path)
    clone = shallow_clone(f"file://{origin.path}", tmp_path / "shallow")
    cache = MemoryHistoryCache()
    index = CallIdIndex(GitStore(clone.path), lambda: cache)
    with pytest.raises(HistoryIncompleteError):
        index.commits_on(MAIN, CALL)
    clone.git("fetch", "-q", "--unshallow")
    index = CallIdIndex(GitStore(clone.path), lambda: cache)  # the same cache, a new process
    assert index.commits_on(MAIN, CALL) == [landed]
