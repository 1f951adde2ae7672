""":class:`applyonce.git.remote.RemotePublisher` against a real ``git daemon``: the server's ref
update is a compare-and-swap, and every answer about the branch comes from the remote."""

from __future__ import annotations

from pathlib import Path

import pytest

from applyonce.errors import UsageError
from applyonce.git.history import CallIdIndex, MemoryHistoryCache
from applyonce.git.publisher import TipMovedError
from applyonce.git.remote import RemotePublisher, parse_pending, pending_ref
from applyonce.git.store import GitStore
from tests.conftest import Repo, Served

MAIN = "refs/heads/main"
CALL = "c" * 64


def publisher_of(clone: Repo) -> RemotePublisher:
    store = GitStore(clone.path)
    return RemotePublisher(store, "origin", CallIdIndex(store, MemoryHistoryCache))


def commit_on(clone: Repo, parent: str, name: str, call: str | None = None) -> str:
    """A commit object on ``parent`` (no ref moves), with a Call-Id trailer when ``call``."""
    tree = clone.git("rev-parse", f"{parent}^{{tree}}").strip()
    message = f"{name}\n\nCall-Id: {call}\n" if call else name
    return clone.git("commit-tree", tree, "-p", parent, "-m", message).strip()


def test_publish_is_a_compare_and_swap_on_the_server(served: Served, tmp_path: Path) -> None:
    clone = served.clone
    publisher = publisher_of(clone)
    base = publisher.tip(MAIN)
    assert base == served.server_git("rev-parse", "main").strip()
    # Another clone moves the server's branch.
    other = served.another_clone(tmp_path / "other")
    theirs = commit_on(other, base, "theirs")
    other.git("push", "-q", "origin", f"{theirs}:{MAIN}")
    mine = commit_on(clone, base, "mine")
    with pytest.raises(TipMovedError) as moved:
        publisher.publish(MAIN, base, mine, reason="test")
    assert moved.value.actual == theirs
    assert served.server_git("rev-parse", "main").strip() == theirs
    assert served.server_git("for-each-ref", "refs/applyonce/") == ""  # its pending ref is gone
    # On the tip the server has, it goes through; the local branch follows (it was at base,
    # and a fast-forward over another clone's commit is not made under a checkout: it stays).
    again = commit_on(clone, theirs, "mine again")
    publisher.publish(MAIN, theirs, again, reason="test")
    assert served.server_git("rev-parse", "main").strip() == again
    assert clone.git("rev-parse", "refs/remotes/origin/main").strip() == again
    assert clone.head() == base


def test_a_new_branch_is_created_only_where_there_is_none(served: Served) -> None:
    publisher = publisher_of(served.clone)
    base = publisher.tip(MAIN)
    assert base is not None
    first = commit_on(served.clone, base, "first")
    assert publisher.tip("refs/heads/topic") is None
    publisher.publish("refs/heads/topic", None, first, reason="test")
    assert served.server_git("rev-parse", "topic").strip() == first
    second = commit_on(served.clone, base, "second")
    with pytest.raises(TipMovedError):
        publisher.publish("refs/heads/topic", None, second, reason="test")
    assert served.server_git("rev-parse", "topic").strip() == first


def test_landed_and_is_on_ask_the_remote(served: Served, tmp_path: Path) -> None:
    publisher = publisher_of(served.clone)
    base = publisher.tip(MAIN)
    assert base is not None
    other = served.another_clone(tmp_path / "other")
    carried = commit_on(other, base, "a call", CALL)
    other.git("push", "-q", "origin", f"{carried}:{MAIN}")
    # Nothing local knows of it; the remote does.
    assert publisher.landed(MAIN, CALL) == [carried]
    assert publisher.landed(MAIN, CALL, since=base) == [carried]
    assert publisher.is_on(MAIN, carried)
    assert served.clone.head() == base


def test_pending_ref_names_round_trip() -> None:
    commit = "a" * 40
    assert parse_pending(pending_ref("refs/heads/team/main", commit)) == (
        "refs/heads/team/main",
        commit,
    )
    assert parse_pending("refs/applyonce/pending/tags/v1/" + commit) is None
    assert parse_pending("refs/heads/main") is None


def test_an_unknown_or_hostile_remote_name_is_a_usage_error(served: Served) -> None:
    store = GitStore(served.clone.path)
    for name in ("nope", "--upload-pack=evil", "../x"):
        with pytest.raises(UsageError):
            RemotePublisher(store, name, CallIdIndex(store, MemoryHistoryCache))
