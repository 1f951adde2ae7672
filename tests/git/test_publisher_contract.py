"""The :class:`applyonce.git.publisher.Publisher` contract, held by every implementation.

The same tests run over :class:`LocalRefPublisher` on a real repository in ``tmp_path`` (with each
history cache) and over the in-memory fake :class:`tests.git.fakes.MemoryPublisher`: the tip of a
ref, ``publish`` as a compare-and-swap that changes nothing when it refuses, ``landed`` with and
without ``since`` (newest first, only commits on the branch), ``is_on``. Then, for
``LocalRefPublisher`` only: real processes racing to publish from one base (exactly one wins), and a
ref lock held by another writer (``LockedError``, nothing moved).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import pytest

from applyonce.git.history import CallIdIndex, MemoryHistoryCache
from applyonce.git.publisher import REF_LOCK_WAIT_S, LocalRefPublisher, Publisher, TipMovedError
from applyonce.git.store import GitStore, LockedError
from applyonce.state.sqlite.history import SqliteHistoryCache
from tests.conftest import Repo, make_repo
from tests.git.fakes import MemoryPublisher

pytestmark = pytest.mark.sampled(every=2, by="module")

MAIN = "refs/heads/main"
OTHER = "refs/heads/other"
NEW = "refs/heads/new"
_ids = itertools.count(1)


def call_id(label: str) -> str:
    """A Call-Id as applyonce writes them: 64 hex digits."""
    return hashlib.sha256(label.encode()).hexdigest()


A, B, C = call_id("a"), call_id("b"), call_id("c")


class World(Protocol):
    """A publisher and the means to build the history it publishes."""

    publisher: Publisher

    def commit(self, parent: str | None, call: str | None = None, *merged: str) -> str:
        """A new commit object on ``parent`` (and ``merged``: a merge commit), with a ``Call-Id``
        trailer when ``call``; no ref moves."""
        ...

    def force(self, ref: str, commit: str | None) -> None:
        """Move ``ref`` behind the publisher's back (``git reset``); None deletes it."""
        ...


class GitWorld:
    """A real repository; commits are made with ``git commit-tree``, refs forced with
    ``git update-ref``."""

    def __init__(self, repo: Repo, cache: str) -> None:
        self.repo = repo
        self.store = GitStore(repo.path)
        if cache == "sqlite":
            path = repo.path / ".git" / "applyonce" / "call-index.sqlite3"
            self.index = CallIdIndex(self.store, lambda: SqliteHistoryCache(path))
        else:
            self.index = CallIdIndex(self.store, MemoryHistoryCache)
        self.publisher: Publisher = LocalRefPublisher(self.store, self.index)
        self.empty_tree = repo.git("hash-object", "-t", "tree", "-w", "/dev/null").strip()

    def commit(self, parent: str | None, call: str | None = None, *merged: str) -> str:
        message = f"commit {next(_ids)}\n"
        if call is not None:
            message += f"\nCall-Id: {call}\n"
        parents = [p for p in (parent, *merged) if p]
        args = ["commit-tree", self.empty_tree, *(f"-p{p}" for p in parents), "-F", "-"]
        result = subprocess.run(
            ["git", "-C", str(self.repo.path), *args],
            input=message,
            capture_output=True,
            text=True,
            check=True,
        )
        return result.stdout.strip()

    def force(self, ref: str, commit: str | None) -> None:
        if commit is None:
            self.repo.git("update-ref", "-d", ref)
        else:
            self.repo.git("update-ref", ref, commit)

    def close(self) -> None:
        self.index.close()


class FakeWorld:
    def __init__(self) -> None:
        self.fake = MemoryPublisher()
        self.publisher: Publisher = self.fake

    def commit(self, parent: str | None, call: str | None = None, *merged: str) -> str:
        parents = [p for p in (parent, *merged) if p]
        return self.fake.add_commit(parents, {"Call-Id": call} if call else {})

    def force(self, ref: str, commit: str | None) -> None:
        self.fake.force(ref, commit)

    def close(self) -> None:
        pass


@pytest.fixture(params=["local-memory-cache", "local-sqlite-cache", "memory"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GitWorld | FakeWorld]:
    if request.param == "memory":
        made: GitWorld | FakeWorld = FakeWorld()
    else:
        made = GitWorld(make_repo(tmp_path / "repo"), request.param.removeprefix("local-"))
    yield made
    made.close()


def branch(world: World, *calls: str | None, ref: str = MAIN) -> list[str]:
    """Publish a root commit then one commit per ``calls`` item on ``ref``; their IDs, oldest
    first."""
    made: list[str] = []
    parent = world.publisher.tip(ref)
    for call in (None, *calls):
        commit = world.commit(parent, call)
        world.publisher.publish(ref, parent, commit, reason="test")
        made.append(commit)
        parent = commit
    return made


# --- tip and publish ----------------------------------------------------------------------------


def test_absent_ref_has_no_tip_nothing_landed_and_nothing_on_it(world: World) -> None:
    commit = world.commit(None, A)
    assert world.publisher.tip(MAIN) is None  # make_repo: an unborn main
    assert world.publisher.tip("refs/heads/never") is None
    assert world.publisher.landed(MAIN, A) == []
    assert world.publisher.is_on(MAIN, commit) is False


def test_publish_from_the_expected_tip_moves_the_ref(world: World) -> None:
    (base,) = branch(world)
    first = world.commit(base, A)
    world.publisher.publish(MAIN, base, first, reason="call a")
    assert world.publisher.tip(MAIN) == first
    second = world.commit(first, B)
    world.publisher.publish(MAIN, first, second, reason="call b")
    assert world.publisher.tip(MAIN) == second
    # Nothing else moved.
    assert world.publisher.tip(OTHER) is None


def test_publish_from_a_stale_base_raises_tip_moved_and_changes_nothing(world: World) -> None:
    base, landed = branch(world, A)
    late = world.commit(base, B)  # staged on base, which is no longer the tip
    with pytest.raises(TipMovedError) as caught:
        world.publisher.publish(MAIN, base, late, reason="call b")
    assert caught.value.actual == landed
    assert caught.value.details["expected"] == base
    assert caught.value.retryable is True
    assert world.publisher.tip(MAIN) == landed
    assert world.publisher.landed(MAIN, B) == []
    assert world.publisher.is_on(MAIN, late) is False


def test_publish_to_an_absent_ref_with_an_expected_tip_raises_and_creates_nothing(
    world: World,
) -> None:
    (base,) = branch(world)
    new = world.commit(base, A)
    with pytest.raises(TipMovedError) as caught:
        world.publisher.publish(NEW, base, new, reason="call a")
    assert caught.value.actual is None
    assert world.publisher.tip(NEW) is None


def test_expected_none_creates_the_branch(world: World) -> None:
    root = world.commit(None, A)
    world.publisher.publish(NEW, None, root, reason="first call")
    assert world.publisher.tip(NEW) == root
    assert world.publisher.landed(NEW, A) == [root]
    # A branch off an existing commit, too.
    (base,) = branch(world)
    world.publisher.publish(OTHER, None, base, reason="branch")
    assert world.publisher.tip(OTHER) == base


def test_expected_none_on_an_existing_ref_raises_tip_moved_and_changes_nothing(
    world: World,
) -> None:
    _, tip = branch(world, A)
    other = world.commit(None, B)
    with pytest.raises(TipMovedError) as caught:
        world.publisher.publish(MAIN, None, other, reason="call b")
    assert caught.value.actual == tip
    assert world.publisher.tip(MAIN) == tip
    assert world.publisher.landed(MAIN, B) == []


# --- landed ---------------------------------------------------------------------------------------


def test_landed_on_the_whole_branch_is_newest_first(world: World) -> None:
    _, a1, b1, a2, _, a3 = branch(world, A, B, A, None, A)
    assert world.publisher.landed(MAIN, A) == [a3, a2, a1]
    assert world.publisher.landed(MAIN, B) == [b1]
    assert world.publisher.landed(MAIN, C) == []
    # Asked again after more commits: the new one comes first.
    (a4,) = branch(world, A)[1:]
    assert world.publisher.landed(MAIN, A) == [a4, a3, a2, a1]


def test_landed_since_a_commit_is_only_the_commits_after_it(world: World) -> None:
    base, a1, b1, a2 = branch(world, A, B, A)
    assert world.publisher.landed(MAIN, A, since=base) == [a2, a1]
    assert world.publisher.landed(MAIN, A, since=a1) == [a2]
    assert world.publisher.landed(MAIN, B, since=a1) == [b1]
    assert world.publisher.landed(MAIN, B, since=b1) == []
    assert world.publisher.landed(MAIN, A, since=a2) == []
    assert world.publisher.landed(NEW, A, since=base) == []  # no such branch


def test_landed_ignores_commits_that_are_not_on_the_branch(world: World) -> None:
    base, a1 = branch(world, A)
    world.commit(a1, B)  # staged, never published
    side = world.commit(base, B)
    world.publisher.publish(OTHER, None, side, reason="elsewhere")
    assert world.publisher.landed(MAIN, B) == []
    assert world.publisher.landed(MAIN, B, since=base) == []
    assert world.publisher.landed(OTHER, B) == [side]
    assert world.publisher.landed(OTHER, A) == []


def test_landed_forgets_a_commit_the_branch_was_reset_past(world: World) -> None:
    base, a1, b1 = branch(world, A, B)
    assert world.publisher.landed(MAIN, A) == [a1]  # seen (and cached) while it was on the branch
    world.force(MAIN, base)  # git reset --hard base: a1 is still in the object database
    assert world.publisher.landed(MAIN, A) == []
    assert world.publisher.landed(MAIN, B) == []
    assert world.publisher.landed(MAIN, A, since=base) == []
    assert world.publisher.is_on(MAIN, a1) is False
    # New history after the rewrite is found, and only it.
    again = world.commit(base, A)
    world.publisher.publish(MAIN, base, again, reason="retry of a")
    assert world.publisher.landed(MAIN, A) == [again]
    assert world.publisher.landed(MAIN, A, since=base) == [again]
    # Back to the old line: the old commits are on the branch again.
    world.force(MAIN, b1)
    assert world.publisher.landed(MAIN, A) == [a1]
    assert world.publisher.landed(MAIN, B) == [b1]


def test_landed_after_the_branch_is_deleted_and_remade(world: World) -> None:
    _, a1 = branch(world, A)
    assert world.publisher.landed(MAIN, A) == [a1]
    world.force(MAIN, None)
    assert world.publisher.landed(MAIN, A) == []
    root = world.commit(None, B)
    world.publisher.publish(MAIN, None, root, reason="remade")
    assert world.publisher.landed(MAIN, A) == []
    assert world.publisher.landed(MAIN, B) == [root]


def test_landed_through_a_merge_is_children_before_parents(world: World) -> None:
    base, a1 = branch(world, A)
    side = world.commit(base, A)
    side_b = world.commit(side, B)
    merge = world.commit(a1, C, side_b)
    world.publisher.publish(MAIN, a1, merge, reason="merge")
    landed = world.publisher.landed(MAIN, A)
    assert sorted(landed) == sorted([a1, side])  # a1 and side are not ancestors of each other
    assert world.publisher.landed(MAIN, C) == [merge]
    assert world.publisher.landed(MAIN, B) == [side_b]
    assert world.publisher.landed(MAIN, A, since=a1) == [side]
    assert world.publisher.landed(MAIN, A, since=side_b) == [a1]
    top = world.commit(merge, A)
    world.publisher.publish(MAIN, merge, top, reason="after the merge")
    assert world.publisher.landed(MAIN, A)[0] == top
    assert world.publisher.is_on(MAIN, side) is True


# --- is_on ----------------------------------------------------------------------------------------


def test_is_on_is_the_tip_and_its_ancestors_only(world: World) -> None:
    base, a1, b1 = branch(world, A, B)
    staged = world.commit(b1, C)
    side = world.commit(base, C)
    world.publisher.publish(OTHER, None, side, reason="elsewhere")
    for commit in (base, a1, b1):
        assert world.publisher.is_on(MAIN, commit) is True
    assert world.publisher.is_on(MAIN, staged) is False  # a child of the tip is not on it
    assert world.publisher.is_on(MAIN, side) is False
    assert world.publisher.is_on(OTHER, side) is True
    assert world.publisher.is_on(OTHER, a1) is False
    assert world.publisher.is_on(MAIN, "0123456789" * 4) is False  # no such object
    assert world.publisher.is_on(NEW, base) is False  # no such branch


# --- a ref held by another writer ---------------------------------------------------------------


def _hold_lock(world: World, ref: str) -> Path | None:
    if isinstance(world, FakeWorld):
        world.fake.lock(ref)
        return None
    assert isinstance(world, GitWorld)
    lock = world.repo.path / ".git" / f"{ref}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("held by another writer\n")
    return lock


_CREATE_UNDER_LOCK = textwrap.dedent(
    """
    import json, sys
    from applyonce.git.history import CallIdIndex, MemoryHistoryCache
    from applyonce.git.publisher import LocalRefPublisher
    from applyonce.git.store import GitStore, LockedError
    store = GitStore(sys.argv[1])
    publisher = LocalRefPublisher(store, CallIdIndex(store, MemoryHistoryCache))
    try:
        publisher.publish(sys.argv[2], None, sys.argv[3], reason="create under lock")
    except LockedError as exc:
        print(json.dumps({"error": exc.kind, "retryable": exc.retryable}))
    else:
        print(json.dumps({"error": None}))
    """
)


@pytest.mark.parametrize(
    "world",
    [pytest.param("local-memory-cache", marks=pytest.mark.slow), "memory"],
    indirect=True,
)
def test_a_ref_locked_by_another_writer_raises_locked_and_moves_nothing(world: World) -> None:
    """A foreign ``refs/heads/<b>.lock`` that stays: publish retries (~12 s for LocalRefPublisher),
    then raises LockedError; the ref, and the lock file, are as they were."""
    _, tip = branch(world, A)
    new = world.commit(tip, B)
    main_lock = _hold_lock(world, MAIN)
    new_lock = _hold_lock(world, NEW)
    child = None
    if isinstance(world, GitWorld):
        # Creating a branch under a held lock, at the same time in another process (so the two
        # waits overlap).
        child = subprocess.Popen(
            [sys.executable, "-c", _CREATE_UNDER_LOCK, str(world.repo.path), NEW, new],
            stdout=subprocess.PIPE,
            text=True,
        )
    else:
        with pytest.raises(LockedError):
            world.publisher.publish(NEW, None, new, reason="create under lock")
    started = time.monotonic()
    with pytest.raises(LockedError) as caught:
        world.publisher.publish(MAIN, tip, new, reason="call b")
    waited = time.monotonic() - started
    assert caught.value.retryable is True
    assert world.publisher.tip(MAIN) == tip
    assert world.publisher.landed(MAIN, B) == []
    assert world.publisher.tip(NEW) is None
    if isinstance(world, GitWorld):
        assert child is not None
        out, _ = child.communicate(timeout=120)
        assert json.loads(out) == {"error": "locked", "retryable": True}
        # it waited for the lock before giving up, and not much longer (a leftover lock)
        assert REF_LOCK_WAIT_S <= waited < REF_LOCK_WAIT_S + 2, waited
        assert main_lock is not None and new_lock is not None
        assert main_lock.read_text() == "held by another writer\n"  # not removed
        assert new_lock.exists()
        world.repo.git("fsck", "--no-dangling")
        main_lock.unlink()
    else:
        assert isinstance(world, FakeWorld)
        world.fake.unlock(MAIN)
    # Released: the same publish goes through.
    world.publisher.publish(MAIN, tip, new, reason="call b")
    assert world.publisher.landed(MAIN, B) == [new]


@pytest.fixture
def git_world(tmp_path: Path) -> Iterator[GitWorld]:
    made = GitWorld(make_repo(tmp_path / "repo"), "memory")
    yield made
    made.close()


def test_a_lock_released_by_its_writer_is_waited_for(git_world: GitWorld) -> None:
    """The foreign lock goes away after a moment (another process removes it): publish retries and
    succeeds. The stale check comes first: a moved ref is reported even while locked."""
    base, tip = branch(git_world, A)
    new = git_world.commit(tip, B)
    lock = _hold_lock(git_world, MAIN)
    assert lock is not None
    # While it is held, a publish from a stale base is told at once the tip moved.
    with pytest.raises(TipMovedError):
        git_world.publisher.publish(MAIN, base, new, reason="stale")
    releaser = subprocess.Popen(["sh", "-c", f"sleep 0.5; rm -f '{lock}'"])
    started = time.monotonic()
    git_world.publisher.publish(MAIN, tip, new, reason="call b")
    waited = time.monotonic() - started
    assert releaser.wait(timeout=30) == 0
    assert waited >= 0.4, waited
    assert git_world.publisher.tip(MAIN) == new
    assert git_world.repo.git("rev-parse", MAIN).strip() == new


# --- real processes racing ------------------------------------------------------------------------

# A Python racer: ready once its publisher is open (it prints "ready"), it publishes when it reads
# a line on stdin.
_RACER = textwrap.dedent(
    """
    import json, sys
    from applyonce.git.history import CallIdIndex, MemoryHistoryCache
    from applyonce.git.publisher import LocalRefPublisher, TipMovedError
    from applyonce.git.store import GitStore
    repo, ref, expected, new = sys.argv[1:]
    store = GitStore(repo)
    publisher = LocalRefPublisher(store, CallIdIndex(store, MemoryHistoryCache))
    print("ready", flush=True)
    sys.stdin.readline()
    try:
        publisher.publish(ref, None if expected == "-" else expected, new, reason="race")
    except TipMovedError as exc:
        print(json.dumps({"new": new, "result": "tip-moved", "actual": exc.actual}))
    else:
        print(json.dumps({"new": new, "result": "won"}))
    """
)


def _race(
    world: GitWorld, ref: str, expected: str | None, pythons: int, gits: int = 0
) -> tuple[str, list[dict[str, str | None]], list[int]]:
    """Start ``pythons`` Python processes publishing, and ``gits`` ``git update-ref --stdin``
    processes (git's own compare-and-swap, its update queued in a transaction), each with its own
    commit on ``expected``; when all are up, signal them all (in a random order), at once: each
    line on a pipe it is blocked reading. Returns the winning commit, the Python processes'
    outcomes and the git processes' exit codes."""
    procs: list[tuple[str, str, subprocess.Popen[str]]] = []
    for n in range(pythons + gits):
        kind = "py" if n < pythons else "git"
        new = world.commit(expected, call_id(f"race-{next(_ids)}"))
        if kind == "py":
            argv = [sys.executable, "-c", _RACER, str(world.repo.path), ref, expected or "-", new]
        else:
            argv = ["git", "-C", str(world.repo.path), "update-ref", "--stdin"]
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert proc.stdin is not None
        if kind == "git":  # all zeros: the ref must not exist yet
            proc.stdin.write(f"start\nupdate {ref} {new} {expected or '0' * 40}\n")
            proc.stdin.flush()
        procs.append((kind, new, proc))
    for kind, _, proc in procs:
        if kind == "py":
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"
    go = {"py": "go\n", "git": "commit\n"}
    for kind, _, proc in random.sample(procs, len(procs)):
        assert proc.stdin is not None
        proc.stdin.write(go[kind])
        proc.stdin.flush()
    outcomes: list[dict[str, str | None]] = []
    codes: list[int] = []
    winners: list[str] = []
    for kind, new, proc in procs:
        out, err = proc.communicate(timeout=60)
        if kind == "py":
            assert proc.returncode == 0, err
            outcome = json.loads(out)
            outcomes.append(outcome)
            if outcome["result"] == "won":
                winners.append(new)
        else:
            codes.append(proc.returncode)
            if proc.returncode == 0:
                winners.append(new)
    assert len(winners) == 1, (winners, outcomes, codes)
    return winners[0], outcomes, codes


@pytest.mark.slow
def test_python_processes_racing_from_one_base_exactly_one_wins(
    git_world: GitWorld, tmp_path: Path
) -> None:
    base = branch(git_world)[0]
    expected: str | None = base
    for _ in range(3):
        winner, outcomes, _ = _race(git_world, MAIN, expected, pythons=6)
        assert git_world.publisher.tip(MAIN) == winner
        assert git_world.repo.git("rev-parse", MAIN).strip() == winner
        for outcome in outcomes:
            if outcome["new"] != winner:
                assert outcome == {"new": outcome["new"], "result": "tip-moved", "actual": winner}
                assert git_world.publisher.is_on(MAIN, str(outcome["new"])) is False
        assert git_world.publisher.landed(
            MAIN, git_world.store.trailers_of(winner)["Call-Id"], since=expected
        ) == [winner]
        expected = winner
    # Three rounds, three commits on top of base: the losers left nothing on the branch.
    assert git_world.repo.git("rev-list", "--count", f"{base}..{MAIN}").strip() == "3"


@pytest.mark.slow
def test_python_processes_racing_to_create_a_branch_exactly_one_wins(
    git_world: GitWorld, tmp_path: Path
) -> None:
    branch(git_world)
    winner, outcomes, _ = _race(git_world, NEW, None, pythons=6)
    assert git_world.publisher.tip(NEW) == winner
    losers = [o for o in outcomes if o["new"] != winner]
    assert len(losers) == 5
    assert all(o["result"] == "tip-moved" and o["actual"] == winner for o in losers), losers


@pytest.mark.slow
def test_python_and_git_update_ref_racing_exactly_one_wins(
    git_world: GitWorld, tmp_path: Path
) -> None:
    expected = branch(git_world)[0]
    for _ in range(3):
        winner, outcomes, codes = _race(git_world, MAIN, expected, pythons=4, gits=4)
        assert git_world.publisher.tip(MAIN) == winner
        for outcome in outcomes:
            if outcome["new"] != winner:
                assert outcome["result"] == "tip-moved" and outcome["actual"] == winner, outcome
        assert sorted(code == 0 for code in codes).count(True) <= 1
        expected = winner
    git_world.repo.git("fsck", "--no-dangling")


def test_the_fake_records_what_it_published() -> None:
    """The fake's own bookkeeping, used by tests above the git layer."""
    fake = MemoryPublisher()
    root = fake.add_commit(trailers={"Call-Id": A})
    fake.publish(MAIN, None, root, reason="first")
    assert fake.published == [(MAIN, None, root, "first")]
    with pytest.raises(ValueError):
        fake.publish(MAIN, root, "f" * 40, reason="unknown commit")
    with pytest.raises(ValueError):
        fake.add_commit(["f" * 40])
    assert fake.tip(MAIN) == root
