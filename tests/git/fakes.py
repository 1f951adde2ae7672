"""In-memory fakes of the Git seams, for tests of code above :mod:`applyonce.git`.

:class:`MemoryPublisher` is a :class:`applyonce.git.publisher.Publisher` over a dict of refs and a
commit graph the test builds (:meth:`MemoryPublisher.add_commit`, with the trailers it gives).
tests/git/test_publisher_contract.py holds it to the same contract as
:class:`applyonce.git.publisher.LocalRefPublisher` on a real repository.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from applyonce.git.publisher import TipMovedError
from applyonce.git.store import LockedError


@dataclass(frozen=True)
class FakeCommit:
    parents: tuple[str, ...]
    trailers: Mapping[str, str] = field(default_factory=dict)


class MemoryPublisher:
    """A :class:`applyonce.git.publisher.Publisher` in memory.

    ``refs`` maps a ref name to its commit; ``commits`` is the object database (a commit graph:
    ID → parents and trailers). Nothing but :meth:`publish` moves a ref through the Protocol; a
    test moves one behind the publisher's back (as ``git reset`` would) with :meth:`force`, and
    makes a ref look held by another writer with :meth:`lock`.
    """

    def __init__(self) -> None:
        self.refs: dict[str, str] = {}
        self.commits: dict[str, FakeCommit] = {}
        self.locked: set[str] = set()
        self.published: list[tuple[str, str | None, str, str]] = []  # (ref, expected, new, reason)
        self._ids = itertools.count(1)

    # --- building the world (not part of the Protocol) ---------------------------------------

    def add_commit(
        self, parents: Iterable[str] = (), trailers: Mapping[str, str] | None = None
    ) -> str:
        """Add a commit object (no ref moves); returns its ID, 40 hex digits like Git's."""
        parents = tuple(parents)
        for parent in parents:
            if parent not in self.commits:
                raise ValueError(f"unknown parent {parent}")
        oid = hashlib.sha1(f"fake-commit-{next(self._ids)}".encode()).hexdigest()
        self.commits[oid] = FakeCommit(parents, dict(trailers or {}))
        return oid

    def force(self, ref: str, commit: str | None) -> None:
        """Point ``ref`` at ``commit`` (None: delete it) without compare-and-swap."""
        if commit is None:
            self.refs.pop(ref, None)
        else:
            self._check_known(commit)
            self.refs[ref] = commit

    def lock(self, ref: str) -> None:
        self.locked.add(ref)

    def unlock(self, ref: str) -> None:
        self.locked.discard(ref)

    # --- the Protocol ---------------------------------------------------------------------------

    def tip(self, ref: str, *, fresh: bool = False) -> str | None:
        return self.refs.get(ref)

    def publish(self, ref: str, expected: str | None, new: str, *, reason: str) -> None:
        current = self.refs.get(ref)
        if current != expected:
            raise TipMovedError(ref, expected, current)
        if ref in self.locked:
            raise LockedError(f"{ref} stays locked by another writer (fake lock)")
        self._check_known(new)
        self.refs[ref] = new
        self.published.append((ref, expected, new, reason))

    def landed(
        self, ref: str, call_id: str, *, since: str | None = None, recent: bool = False
    ) -> list[str]:
        return [
            commit
            for commit in self._walk(self.refs.get(ref), hide=since)
            if self.commits[commit].trailers.get("Call-Id") == call_id
        ]

    def follow(self, ref: str, commits: set[str]) -> None:
        pass  # one copy of each ref

    def is_on(self, ref: str, commit: str) -> bool:
        tip = self.refs.get(ref)
        return tip is not None and commit in self._ancestry(tip)

    # --- the graph --------------------------------------------------------------------------

    def _check_known(self, commit: str) -> None:
        if commit not in self.commits:
            raise ValueError(f"target {commit} does not exist")

    def _ancestry(self, tip: str | None) -> set[str]:
        """``tip`` and all its ancestors (empty for None or an unknown commit, as ``git log
        ^unknown`` hides nothing)."""
        seen: set[str] = set()
        todo = [tip] if tip is not None and tip in self.commits else []
        while todo:
            commit = todo.pop()
            if commit not in seen:
                seen.add(commit)
                todo.extend(self.commits[commit].parents)
        return seen

    def _walk(self, tip: str | None, *, hide: str | None = None) -> list[str]:
        """The commits reachable from ``tip`` and not from ``hide``, children before parents."""
        wanted = self._ancestry(tip) - self._ancestry(hide)
        children = {commit: 0 for commit in wanted}
        for commit in wanted:
            for parent in self.commits[commit].parents:
                if parent in wanted:
                    children[parent] += 1
        order: list[str] = []
        ready = [tip] if tip in wanted else []
        while ready:
            commit = ready.pop()
            order.append(commit)
            for parent in reversed(self.commits[commit].parents):
                if parent in wanted:
                    children[parent] -= 1
                    if children[parent] == 0:
                        ready.append(parent)
        return order
