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


def test_every_clone_of_a_remote_names_its_repository_alike(served: Served, tmp_path: Path) -> None:
    """The identity a shared ledger keeps a repository's calls by: one for the remote, agreed by
    clones that ask at once (the ref is created by compare-and-swap), another for another
    repository; it does not depend on the URL a clone spells the remote by."""
    import threading

    clones = [served.clone, *(served.another_clone(tmp_path / f"c{n}") for n in range(3))]
    clones[1].git("remote", "set-url", "origin", served.url.replace("127.0.0.1", "localhost"))
    found: list[str] = []
    threads = [
        threading.Thread(target=lambda c=c: found.append(publisher_of(c).repository_id()))
        for c in clones
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(found) == 4 and len(set(found)) == 1
    on_server = served.server_git("rev-parse", "refs/applyonce/repository").strip()
    assert found[0] == f"remote:{on_server}"
    assert served.server_git("cat-file", "-t", on_server).strip() == "commit"
    # Asked again: this clone's copy answers (the server's ref deleted: no round trip made).
    served.server_git("update-ref", "-d", "refs/applyonce/repository")
    assert publisher_of(served.clone).repository_id() == found[0]
    # Another repository (here an empty one): another identity.
    clones[2].git("remote", "add", "elsewhere", served.daemon.make_bare())
    store = GitStore(clones[2].path)
    elsewhere = RemotePublisher(store, "elsewhere", CallIdIndex(store, MemoryHistoryCache))
    assert elsewhere.repository_id() not in found
