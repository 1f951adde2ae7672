"""The Call-Id history index: the :class:`HistoryCache` contract, and :class:`CallIdIndex` on a
real repository.

The cache contract runs over :class:`MemoryHistoryCache` and :class:`SqliteHistoryCache`: add,
commits, calls and scanned_tip, newest first across several ``add`` batches, re-adding changes
nothing, refs kept apart. The index tests use a real repository in ``tmp_path``: a refresh reads
only the commits since the tip it scanned last (counted through a store that records its walks),
a reset or rewritten branch is handled, and a lost or garbage cache file loses nothing.
"""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from applyonce.errors import ApplyOnceError
from applyonce.flow.context import HISTORY_FILE, _history_cache, open_context
from applyonce.git.history import CallIdIndex, HistoryCache, MemoryHistoryCache
from applyonce.git.store import GitStore
from applyonce.state.sqlite.history import SqliteHistoryCache
from tests.conftest import Repo, make_repo

MAIN = "refs/heads/main"
OTHER = "refs/heads/other"
_ids = itertools.count(1)


def call_id(label: str) -> str:
    return hashlib.sha256(label.encode()).hexdigest()


def oid(label: str) -> str:
    return hashlib.sha1(label.encode()).hexdigest()


A, B, C = call_id("a"), call_id("b"), call_id("c")


# --- the HistoryCache contract --------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryCache]:
    made: HistoryCache = (
        MemoryHistoryCache()
        if request.param == "memory"
        else SqliteHistoryCache(tmp_path / "state" / HISTORY_FILE)
    )
    yield made
    made.close()


def test_an_empty_cache_knows_nothing(cache: HistoryCache) -> None:
    assert cache.scanned_tip(MAIN) is None
    assert cache.commits(MAIN, A) == []
    assert cache.calls(MAIN) == {}


def test_one_batch_is_kept_newest_first(cache: HistoryCache) -> None:
    c1, c2, c3, tip = oid("c1"), oid("c2"), oid("c3"), oid("tip")
    cache.add(MAIN, [(A, c3), (B, c2), (A, c1)], tip)
    assert cache.scanned_tip(MAIN) == tip
    assert cache.commits(MAIN, A) == [c3, c1]
    assert cache.commits(MAIN, B) == [c2]
    assert cache.commits(MAIN, C) == []
    assert cache.calls(MAIN) == {A: [c3, c1], B: [c2]}


def test_later_batches_come_first(cache: HistoryCache) -> None:
    c = [oid(f"c{n}") for n in range(7)]
    cache.add(MAIN, [(A, c[1]), (A, c[0])], c[1])
    assert cache.scanned_tip(MAIN) == c[1]
    cache.add(MAIN, [(B, c[3]), (A, c[2])], c[3])
    cache.add(MAIN, [], c[4])  # a batch without a Call-Id still moves the scanned tip
    assert cache.scanned_tip(MAIN) == c[4]
    cache.add(MAIN, [(A, c[6]), (B, c[5])], c[6])
    assert cache.scanned_tip(MAIN) == c[6]
    assert cache.commits(MAIN, A) == [c[6], c[2], c[1], c[0]]
    assert cache.commits(MAIN, B) == [c[5], c[3]]
    assert cache.calls(MAIN) == {A: [c[6], c[2], c[1], c[0]], B: [c[5], c[3]]}


def test_re_adding_changes_nothing_but_the_scanned_tip(cache: HistoryCache) -> None:
    c1, c2, c3 = oid("c1"), oid("c2"), oid("c3")
    cache.add(MAIN, [(A, c2), (A, c1)], c2)
    cache.add(MAIN, [(A, c2), (A, c1)], c2)  # the same batch again
    assert cache.commits(MAIN, A) == [c2, c1]
    cache.add(MAIN, [(A, c3)], c3)
    cache.add(MAIN, [(A, c2), (A, c1)], c2)  # an old batch again (a reset, then a full rescan)
    assert cache.commits(MAIN, A) == [c3, c2, c1]  # no duplicate, no reordering
    assert cache.calls(MAIN) == {A: [c3, c2, c1]}
    assert cache.scanned_tip(MAIN) == c2  # the tip is whatever was scanned last


def test_refs_are_kept_apart(cache: HistoryCache) -> None:
    shared, mine, theirs = oid("shared"), oid("mine"), oid("theirs")
    cache.add(MAIN, [(A, mine), (A, shared)], mine)
    cache.add(OTHER, [(A, theirs), (A, shared), (B, oid("b"))], theirs)
    assert cache.scanned_tip(MAIN) == mine
    assert cache.scanned_tip(OTHER) == theirs
    assert cache.commits(MAIN, A) == [mine, shared]
    assert cache.commits(OTHER, A) == [theirs, shared]
    assert cache.commits(MAIN, B) == []
    assert set(cache.calls(MAIN)) == {A}
    assert cache.scanned_tip("refs/heads/third") is None


def test_what_is_returned_is_a_copy(cache: HistoryCache) -> None:
    c1 = oid("c1")
    cache.add(MAIN, [(A, c1)], c1)
    cache.commits(MAIN, A).append("junk")
    cache.calls(MAIN)[A].append("junk")
    assert cache.commits(MAIN, A) == [c1]
    assert cache.calls(MAIN) == {A: [c1]}


def test_the_sqlite_cache_survives_a_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state" / HISTORY_FILE
    first = SqliteHistoryCache(path)
    c1, c2 = oid("c1"), oid("c2")
    first.add(MAIN, [(A, c1)], c1)
    first.add(MAIN, [(A, c2)], c2)
    first.close()
    again = SqliteHistoryCache(path)
    try:
        assert again.scanned_tip(MAIN) == c2
        assert again.commits(MAIN, A) == [c2, c1]
    finally:
        again.close()


def test_a_garbage_cache_file_is_an_applyonce_error(tmp_path: Path) -> None:
    path = tmp_path / "state" / HISTORY_FILE
    path.parent.mkdir()
    path.write_bytes(b"this is not a SQLite database\x00" * 200)
    with pytest.raises(ApplyOnceError):
        SqliteHistoryCache(path)


# --- CallIdIndex on a real repository -------------------------------------------------------------


class CountingStore(GitStore):
    """A GitStore that records each history walk: (tip, hide, commits read)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.walks: list[tuple[str | None, str | None, int]] = []

    def walk_trailers(
        self, tip: str | None, *, hide: str | None = None, key: str | None = None
    ) -> Iterator[tuple[str, dict[str, str]]]:
        read = list(super().walk_trailers(tip, hide=hide, key=key))
        self.walks.append((tip, hide, len(read)))
        return iter(read)


def commit(repo: Repo, call: str | None = None, *, ref: str = MAIN) -> str:
    """A commit on ``ref`` (moved with ``git update-ref``), with a ``Call-Id`` trailer when
    ``call``."""
    parent = repo.git("rev-parse", "--verify", "-q", ref, check=False).strip()
    message = f"commit {next(_ids)}\n" + (f"\nCall-Id: {call}\n" if call else "")
    tree = repo.git("hash-object", "-t", "tree", "-w", "/dev/null").strip()
    made = subprocess.run(
        [
            "git",
            "-C",
            str(repo.path),
            "commit-tree",
            tree,
            *(["-p", parent] if parent else []),
            "-F",
            "-",
        ],
        input=message,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    repo.git("update-ref", ref, made)
    return made


@pytest.fixture
def empty(tmp_path: Path) -> Repo:
    return make_repo(tmp_path / "repo")


@pytest.fixture(params=["memory", "sqlite"])
def open_cache(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], HistoryCache]:
    """A factory of the cache under test: the SQLite one opens the same file each time."""
    path = tmp_path / "state" / HISTORY_FILE
    memory = MemoryHistoryCache()
    if request.param == "memory":
        return lambda: memory
    return lambda: SqliteHistoryCache(path)


def test_refresh_reads_only_the_commits_since_the_last_scanned_tip(
    empty: Repo, open_cache: Callable[[], HistoryCache]
) -> None:
    store = CountingStore(empty.path)
    index = CallIdIndex(store, open_cache)
    try:
        base = commit(empty)
        a1 = commit(empty, A)
        b1 = commit(empty, B)
        assert index.commits_on(MAIN, A) == [a1]
        assert store.walks == [(b1, None, 3)]  # the whole branch, once
        assert index.cache.scanned_tip(MAIN) == b1
        # Nothing new: no walk at all.
        assert index.commits_on(MAIN, B) == [b1]
        assert index.calls(MAIN) == {A: [a1], B: [b1]}
        assert store.walks == [(b1, None, 3)]
        # Two new commits: only they are read.
        a2 = commit(empty, A)
        plain = commit(empty)
        assert index.commits_on(MAIN, A) == [a2, a1]
        assert store.walks[1:] == [(plain, b1, 2)]
        assert index.cache.scanned_tip(MAIN) == plain
        assert index.refresh(MAIN) == plain
        assert len(store.walks) == 2
        assert base not in index.commits_on(MAIN, A)
    finally:
        index.close()


def test_a_reopened_sqlite_cache_reads_only_the_new_commits(empty: Repo, tmp_path: Path) -> None:
    """The cache beside the ledger outlives the process: the next one reads from where the last
    one stopped."""
    path = tmp_path / "state" / HISTORY_FILE
    commit(empty)
    a1 = commit(empty, A)
    first = CallIdIndex(GitStore(empty.path), lambda: SqliteHistoryCache(path))
    assert first.commits_on(MAIN, A) == [a1]
    first.close()
    a2 = commit(empty, A)
    store = CountingStore(empty.path)
    second = CallIdIndex(store, lambda: SqliteHistoryCache(path))
    try:
        assert second.commits_on(MAIN, A) == [a2, a1]
        assert store.walks == [(a2, a1, 1)]
    finally:
        second.close()


def test_a_reset_branch_drops_the_commits_it_no_longer_has(
    empty: Repo, open_cache: Callable[[], HistoryCache]
) -> None:
    store = CountingStore(empty.path)
    index = CallIdIndex(store, open_cache)
    try:
        base = commit(empty)
        a1 = commit(empty, A)
        b1 = commit(empty, B)
        assert index.commits_on(MAIN, A) == [a1]
        empty.git("update-ref", MAIN, base)  # git reset --hard base
        assert index.commits_on(MAIN, A) == []
        assert index.commits_on(MAIN, B) == []
        assert index.cache.scanned_tip(MAIN) == base
        assert store.walks[-1] == (base, b1, 0)  # nothing new to read: base is below b1
        # calls() is what was ever seen on the ref, gone or not (its docstring).
        assert index.calls(MAIN) == {A: [a1], B: [b1]}
        # New history after the reset is found; the old commit stays filtered out.
        a2 = commit(empty, A)
        assert index.commits_on(MAIN, A) == [a2]
        assert store.walks[-1] == (a2, base, 1)
        # Back to the old line (git reset --hard b1): the old commits are on the branch again.
        empty.git("update-ref", MAIN, b1)
        assert index.commits_on(MAIN, A) == [a1]
        assert index.commits_on(MAIN, B) == [b1]
    finally:
        index.close()


def test_a_rewrite_whose_old_tip_is_gone_from_the_repository_is_rescanned(
    empty: Repo, open_cache: Callable[[], HistoryCache]
) -> None:
    """A rewrite (amend, rebase) then ``gc --prune=now``: the scanned tip no longer exists, so the
    next process reads the whole branch again; nothing of the new history is missed. (Within the
    process that read it, libgit2's object cache still has the pruned commit.)"""
    first = CallIdIndex(GitStore(empty.path), open_cache)
    base = commit(empty)
    a1 = commit(empty, A)
    assert first.commits_on(MAIN, A) == [a1]
    first.close()
    empty.git("update-ref", MAIN, base)
    rewritten = commit(empty, A)
    b1 = commit(empty, B)
    empty.git("reflog", "expire", "--expire=now", "--all")
    empty.git("gc", "-q", "--prune=now")
    assert empty.git("cat-file", "-t", a1, check=False) == ""
    store = CountingStore(empty.path)
    index = CallIdIndex(store, open_cache)
    try:
        assert not store.has_object(a1)
        assert index.cache.scanned_tip(MAIN) == a1
        assert index.commits_on(MAIN, A) == [rewritten]
        assert index.commits_on(MAIN, B) == [b1]
        assert store.walks == [(b1, None, 3)]  # hide=None: the whole branch
    finally:
        index.close()


def test_refs_are_indexed_apart(empty: Repo, open_cache: Callable[[], HistoryCache]) -> None:
    index = CallIdIndex(GitStore(empty.path), open_cache)
    try:
        base = commit(empty)
        a1 = commit(empty, A)
        empty.git("update-ref", OTHER, base)
        a_other = commit(empty, A, ref=OTHER)
        assert index.commits_on(MAIN, A) == [a1]
        assert index.commits_on(OTHER, A) == [a_other]
        assert index.commits_on("refs/heads/none", A) == []
        assert index.refresh("refs/heads/none") is None
    finally:
        index.close()


def test_a_deleted_cache_file_loses_nothing(empty: Repo, tmp_path: Path) -> None:
    path = tmp_path / "state" / HISTORY_FILE
    commit(empty)
    a1 = commit(empty, A)
    b1 = commit(empty, B)
    first = CallIdIndex(GitStore(empty.path), lambda: SqliteHistoryCache(path))
    assert first.commits_on(MAIN, A) == [a1]
    first.close()
    for stale in path.parent.glob(f"{HISTORY_FILE}*"):
        stale.unlink()
    a2 = commit(empty, A)
    store = CountingStore(empty.path)
    second = CallIdIndex(store, lambda: SqliteHistoryCache(path))
    try:
        assert second.commits_on(MAIN, A) == [a2, a1]
        assert second.commits_on(MAIN, B) == [b1]
        assert store.walks == [(a2, None, 4)]  # read once, whole
    finally:
        second.close()


def test_history_cache_remakes_a_garbage_file(empty: Repo, tmp_path: Path) -> None:
    """flow.context._history_cache: a cache file SQLite cannot read is deleted and made again,
    and the index built on it finds every call."""
    state = tmp_path / "state"
    state.mkdir()
    path = state / HISTORY_FILE
    path.write_bytes(b"garbage, not SQLite\n" * 500)
    (state / f"{HISTORY_FILE}-wal").write_bytes(b"garbage wal")
    commit(empty)
    a1 = commit(empty, A)
    cache = _history_cache(state, read_only=False)
    try:
        assert isinstance(cache, SqliteHistoryCache)
        assert cache.scanned_tip(MAIN) is None
        index = CallIdIndex(GitStore(empty.path), lambda: cache)
        assert index.commits_on(MAIN, A) == [a1]
    finally:
        cache.close()
    assert not path.read_bytes().startswith(b"garbage")
    again = SqliteHistoryCache(path)  # it is a good file now, with what was found
    try:
        assert again.commits(MAIN, A) == [a1]
    finally:
        again.close()


def test_history_cache_read_only_without_a_file_is_in_memory(tmp_path: Path) -> None:
    state = tmp_path / "state"
    cache = _history_cache(state, read_only=True)
    assert isinstance(cache, MemoryHistoryCache)
    assert not state.exists()


def test_a_garbage_cache_file_under_open_context_loses_nothing(empty: Repo) -> None:
    """End to end: the publisher of a context whose cache file is garbage still answers."""
    commit(empty)
    a1 = commit(empty, A)
    state = empty.state_dir()
    state.mkdir(parents=True)
    (state / HISTORY_FILE).write_bytes(b"\xff" * 4096)
    context = open_context(empty.path)
    try:
        assert context.publisher.landed(MAIN, A) == [a1]
        assert context.publisher.landed(MAIN, B) == []
    finally:
        context.close()


def _corrupt_all_but_the_schema_and_migrations(path: Path) -> None:
    """Overwrite every page of the SQLite file except page 1 (the schema) and the migrations
    table's and its index's (one page each here): the file opens and migrates, and the first read of the index's tables fails
    (``database disk image is malformed``)."""
    db = sqlite3.connect(path)
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    keep = {1} | {
        row[0]
        for row in db.execute("SELECT rootpage FROM sqlite_master WHERE name LIKE '%migrations%'")
    }
    db.close()
    data = bytearray(path.read_bytes())
    for page in range(1, len(data) // page_size + 1):
        if page not in keep:
            start = (page - 1) * page_size
            data[start : start + page_size] = b"\xde\xad" * (page_size // 2)
    path.write_bytes(bytes(data))


def test_a_cache_file_corrupted_inside_loses_nothing(empty: Repo) -> None:
    commit(empty)
    a1 = commit(empty, A)
    context = open_context(empty.path)
    assert context.publisher.landed(MAIN, A) == [a1]  # the cache file now exists
    context.close()
    _corrupt_all_but_the_schema_and_migrations(empty.state_dir() / HISTORY_FILE)
    context = open_context(empty.path)
    try:
        assert context.publisher.landed(MAIN, A) == [a1]
    finally:
        context.close()
