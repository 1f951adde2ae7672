"""The commit point: where a call takes effect, and where to ask whether it has.

A :class:`Publisher` is the branch as the calls see it: its tip, ``publish`` — the single step that
makes a call take effect, a compare-and-swap of the ref from the base the call was staged on to its
commit — and "which commits carrying Call-Id X are on the branch". Apply, recovery, resolve and
audit all ask the same publisher, so "did call X land?" has one answer.

:class:`LocalRefPublisher` publishes to ``refs/heads/<branch>`` of the repository itself: libgit2
checks the old value under the ref's lock, and fsyncs the ref (switched on in
:mod:`applyonce.git.store`). Given a lock journal, it journals that lock before libgit2 takes it
(:func:`applyonce.state.lockjournal.journaled_ref_lock`), so that ``applyonce recover`` can prove a
lock left by a publish killed inside libgit2 its own, and remove it.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Protocol

import pygit2

from applyonce.errors import ConflictError, StateError
from applyonce.faults import fault
from applyonce.git.history import CallIdIndex, require_complete
from applyonce.git.store import GitStore, LockedError
from applyonce.state.lockjournal import journaled_ref_lock, stale_lock_hint

# Another git holds a ref's lock for milliseconds; a lock that stays is left over, so the call
# gives up after this long (as for the index lock) and says how to remove it.
REF_LOCK_WAIT_S = 3.0


class TipMovedError(ConflictError):
    """The branch tip is no longer the base the call was staged on."""

    kind = "tip-moved"
    default_retryable = True

    def __init__(self, ref: str, expected: str | None, actual: str | None) -> None:
        super().__init__(
            f"{ref} moved from {str(expected)[:12]} to {str(actual)[:12]} during the call",
            ref=ref,
            expected=expected,
            actual=actual,
        )
        self.actual = actual


class CallOnBranchError(ConflictError):
    """The server refused the update because the call is on the branch already (its
    ``applyonce hook pre-receive``: a commit there carries the same ``Call-Id``, landed by a
    clone this one did not see): the call is adopted, never committed twice."""

    kind = "call-on-branch"
    default_retryable = True

    def __init__(self, ref: str, call_id: str, commit: str) -> None:
        super().__init__(
            f"{ref} holds call {call_id[:12]} already, in commit {commit[:12]}",
            ref=ref,
            call_id=call_id,
            commit=commit,
        )
        self.call_id = call_id
        self.commit = commit


class PublishUnknownError(StateError):
    """The update was sent and the place it was sent to could not say whether it took it (a
    remote whose connection dropped): the call stays in flight, as a crash would leave it, and is
    never reported rejected."""

    kind = "publish-unknown"
    default_hint = (
        "do not send it as a new call; once the remote answers, run 'applyonce recover' (with"
        " the same --remote) to settle it"
    )


class Publisher(Protocol):
    """The branch a call publishes to (see the module docstring)."""

    def tip(self, ref: str, *, fresh: bool = False) -> str | None:
        """The commit the branch points at (None: the branch does not exist yet); ``fresh``: as
        it is now, not as a remote's was last fetched a moment ago."""
        ...

    def publish(self, ref: str, expected: str | None, new: str, *, reason: str) -> None:
        """Move ``ref`` from ``expected`` to ``new``, or not at all.

        Raises:
            TipMovedError: the ref is not at ``expected``; nothing changed.
            LockedError: another writer holds the ref too long; nothing changed.
            PublishUnknownError: whether ``ref`` moved cannot be learned now.
        """
        ...

    def landed(
        self, ref: str, call_id: str, *, since: str | None = None, recent: bool = False
    ) -> list[str]:
        """The commits on ``ref`` (after ``since``; None: the whole branch) whose ``Call-Id``
        trailer is ``call_id``, newest first. Never "none" from a history it knows is
        incomplete (a shallow clone, grafts). ``recent``: a view of a remote's branch fetched a
        moment ago will do (for a call the ledger never saw run: see
        :func:`applyonce.flow.call.apply._find_published`).

        Raises:
            HistoryIncompleteError: none found here, and commits of the range are missing.
        """
        ...

    def is_on(self, ref: str, commit: str) -> bool:
        """Whether ``commit`` is on ``ref`` now (the tip or one of its ancestors)."""
        ...

    def follow(self, ref: str, commits: set[str]) -> None:
        """Before the checkouts of ``ref`` are synced for the calls whose commits are
        ``commits``: bring a local copy of the branch along where the sync covers every commit
        it passes over (a remote's branch; nothing to do for the repository's own)."""
        ...


class _RefLockedError(Exception):
    """The ref's lock file exists: another writer holds it (libgit2 is not even asked)."""


class LocalRefPublisher:
    """A :class:`Publisher` over a branch of the repository itself.

    ``journal``: where the ref locks libgit2 takes for it are journaled (None: not journaled; a
    lock left by a killed publish is then only reported by ``recover``)."""

    def __init__(self, store: GitStore, index: CallIdIndex, journal: Path | None = None) -> None:
        self.store = store
        self.index = index
        self.journal = journal

    def tip(self, ref: str, *, fresh: bool = False) -> str | None:
        return self.store.tip(ref)

    def publish(self, ref: str, expected: str | None, new: str, *, reason: str) -> None:
        """Move ``ref`` from ``expected`` to ``new`` by compare-and-swap.

        Raises:
            TipMovedError: the ref is not at ``expected`` (another writer got there first).
            ObjectsMissingError: the commit needs objects that are gone (nothing changed).
        """
        # Never a branch pointing at missing objects: what a concurrent prune removed is
        # rewritten first, and again after the move (a prune that judged them unreachable just
        # before it may still be deleting).
        self.store.written.ensure_complete(new, down_to=expected)
        self._compare_and_swap(ref, expected, new, reason=reason)
        self.store.written.flush()
        # The branch reaches them now: the staging's packs are git's to repack from here on.
        self.store.written.end()

    def _compare_and_swap(self, ref: str, expected: str | None, new: str, *, reason: str) -> None:
        deadline = time.monotonic() + REF_LOCK_WAIT_S
        attempt = 0
        while True:
            attempt += 1
            current_tip = self.store.tip(ref)
            if current_tip != expected:
                raise TipMovedError(ref, expected, current_tip)
            try:
                self._swap(ref, expected, new, reason)
                return
            except (pygit2.GitError, OSError, KeyError, _RefLockedError) as exc:
                text = str(exc)
                now_at = self.store.tip(ref)
                if now_at != expected:  # moved or deleted under us: the CAS did its job
                    raise TipMovedError(ref, expected, now_at) from None
                if "lock" not in text:
                    raise
                if time.monotonic() < deadline:
                    time.sleep(min(0.01 * attempt, 0.1))
                    continue
                lock = self.store.common_dir / f"{ref}.lock"
                raise LockedError(
                    f"{ref} stays locked by another writer ({text.strip()})",
                    hint=stale_lock_hint(self.journal, lock),
                ) from None

    def _swap(self, ref: str, expected: str | None, new: str, reason: str) -> None:
        """One compare-and-swap by libgit2. The lock it takes (``<ref>.lock`` in the common
        directory, filled with ``<new>\\n``; libgit2 1.9 takes no reflog or packed-refs lock to
        update a branch) is journaled for as long as libgit2 may hold it."""
        journaled: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if self.journal is not None:
            lock = self.store.common_dir / f"{ref}.lock"
            if os.path.lexists(lock):
                # Someone else's: journaling it now would name their lock as ours.
                raise _RefLockedError(f"failed to lock file '{lock}' for writing")
            journaled = journaled_ref_lock(
                self.journal, lock, ref=ref, expected=expected, content=f"{new}\n".encode()
            )
        with journaled:
            fault("during-publish")
            if expected is None:
                if self.store.repo.references.get(ref) is not None:
                    raise TipMovedError(ref, None, self.store.tip(ref))
                self.store.repo.create_reference_direct(
                    ref, pygit2.Oid(hex=new), False, message=reason
                )
                return
            current = self.store.repo.references.get(ref)
            if current is None or str(current.target) != expected:
                raise TipMovedError(ref, expected, None if current is None else str(current.target))
            # set_target passes the value read above to libgit2 as the expected old value,
            # checked under the ref's lock: a writer between the read and here makes it fail.
            current.set_target(pygit2.Oid(hex=new), reason)

    def landed(
        self, ref: str, call_id: str, *, since: str | None = None, recent: bool = False
    ) -> list[str]:
        """See :class:`Publisher` (the branch here is always current: ``recent`` changes
        nothing). A shallow or grafted clone's branch cannot show that a call
        is not on it (the commit may be below the cut, made before the clone): with nowhere to
        fetch the rest from, the answer is a refusal that says how to deepen it.

        Raises:
            HistoryIncompleteError: nothing found, and commits of the searched range are missing.
        """
        if since is None:
            return self.index.commits_on(ref, call_id)
        tip = self.store.tip(ref)
        found = [
            commit
            for commit, block in self.store.walk_trailers(tip, hide=since)
            if call_id in block.all("Call-Id")
        ]
        if not found:
            require_complete(self.store, ref, tip, hide=since)
        return found

    def follow(self, ref: str, commits: set[str]) -> None:
        pass  # the branch is the repository's own: it is where the calls published

    def is_on(self, ref: str, commit: str) -> bool:
        tip = self.store.tip(ref)
        return (
            tip is not None
            and self.store.has_object(commit)
            and self.store.is_ancestor(commit, tip)
        )
