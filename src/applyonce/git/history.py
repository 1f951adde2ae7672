"""The Call-Id history index: which commits of a branch carry which ``Call-Id``.

It is a cache of Git, nothing more: rebuilt from the branch whenever it is lost, and never the
record of a call (that is the ledger's). Each refresh reads only the commits since the tip it last
scanned (the whole branch once), so asking "has call X landed on R?" costs the commits since the
last call, not the history. Where the cache is kept is the :class:`HistoryCache`'s business: a
file beside the ledger (:class:`applyonce.state.sqlite.history.SqliteHistoryCache`), or memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import pygit2

from applyonce.git.store import GitStore

# How far "which later commits changed these paths" looks: the commits walked from the tip, and
# the commits listed. A repeat answers at once, whatever the length of the branch since.
LATER_WALK_LIMIT = 1000
LATER_LISTED = 5


class HistoryCache(Protocol):
    """Storage of the index: ``(call_id, commit)`` pairs per ref, and the tip scanned last."""

    def scanned_tip(self, ref: str) -> str | None: ...

    def add(self, ref: str, found: list[tuple[str, str]], tip: str) -> None:
        """Record ``found`` (``(call_id, commit)``, newest first) as seen on ``ref`` up to
        ``tip``, in one step."""
        ...

    def commits(self, ref: str, call_id: str) -> list[str]:
        """The commits recorded for ``call_id`` on ``ref``, newest first."""
        ...

    def calls(self, ref: str) -> dict[str, list[str]]:
        """Call-Id → commits (newest first), for every Call-Id recorded on ``ref``."""
        ...

    def close(self) -> None: ...


class MemoryHistoryCache:
    """A :class:`HistoryCache` that lives as long as the process (inspection, tests)."""

    def __init__(self) -> None:
        self._tips: dict[str, str] = {}
        self._found: dict[str, dict[str, list[str]]] = {}

    def scanned_tip(self, ref: str) -> str | None:
        return self._tips.get(ref)

    def add(self, ref: str, found: list[tuple[str, str]], tip: str) -> None:
        calls = self._found.setdefault(ref, {})
        for call_id, commit in reversed(found):
            known = calls.setdefault(call_id, [])
            if commit not in known:
                known.insert(0, commit)
        self._tips[ref] = tip

    def commits(self, ref: str, call_id: str) -> list[str]:
        return list(self._found.get(ref, {}).get(call_id, []))

    def calls(self, ref: str) -> dict[str, list[str]]:
        return {call: list(commits) for call, commits in self._found.get(ref, {}).items()}

    def close(self) -> None:
        pass


class CallIdIndex:
    """The index of one repository over a :class:`HistoryCache`, opened on first use."""

    def __init__(self, store: GitStore, open_cache: Callable[[], HistoryCache]) -> None:
        self.store = store
        self._open_cache = open_cache
        self._cache: HistoryCache | None = None
        # Where a branch's tip is read: the local ref, or (a remote publisher sets it) the
        # remote-tracking ref the remote's branch was last fetched into.
        self.tip_of: Callable[[str], str | None] = store.tip

    @property
    def cache(self) -> HistoryCache:
        if self._cache is None:
            self._cache = self._open_cache()
        return self._cache

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    def refresh(self, ref: str) -> str | None:
        """Bring the index of ``ref`` up to date; returns the tip (None: no such branch)."""
        tip = self.tip_of(ref)
        if tip is None:
            return None
        last = self.cache.scanned_tip(ref)
        if last != tip:
            hide = last if last is not None and self.store.has_object(last) else None
            found = [
                (call, commit)
                for commit, block in self.store.walk_trailers(tip, hide=hide, key="Call-Id")
                for call in block.all("Call-Id")
            ]
            self.cache.add(ref, found, tip)
        return tip

    def commits_on(self, ref: str, call_id: str) -> list[str]:
        """The commits carrying ``call_id`` that the branch has now, newest first."""
        tip = self.refresh(ref)
        if tip is None:
            return []
        return [
            commit
            for commit in self.cache.commits(ref, call_id)
            if self.store.has_object(commit) and self.store.is_ancestor(commit, tip)
        ]

    def calls(self, ref: str) -> dict[str, list[str]]:
        """Call-Id → commits ever seen on ``ref`` (some may be gone from it since), refreshed."""
        self.refresh(ref)
        return self.cache.calls(ref)


@dataclass(frozen=True)
class LaterCommit:
    """A commit after a call's commit that changed some of the call's paths."""

    commit: str
    paths: tuple[str, ...]


@dataclass(frozen=True)
class LaterChanges:
    """The commits on a branch after a call's commit that changed its paths, newest first.
    ``complete`` is False when there may be more than ``commits`` lists (the list or the walk
    reached its bound)."""

    commits: tuple[LaterCommit, ...] = ()
    complete: bool = True


def later_changes(
    store: GitStore,
    tip: str,
    commit: str,
    paths: Iterable[str],
    *,
    walk_limit: int = LATER_WALK_LIMIT,
    listed: int = LATER_LISTED,
) -> LaterChanges:
    """The commits reachable from ``tip`` and not from ``commit`` that changed any of ``paths``
    (each compared with its first parent, path by path: no whole-tree diff), newest first.

    Walks at most ``walk_limit`` commits and lists at most ``listed``.
    """
    wanted = sorted(set(paths))
    found: list[LaterCommit] = []
    for walked, later in enumerate(store.commits(tip, hide=commit)):
        if walked >= walk_limit or len(found) >= listed:
            return LaterChanges(tuple(found), complete=False)
        parent = later.parents[0].tree if later.parents else None
        changed = tuple(p for p in wanted if _entry(later.tree, p) != _entry(parent, p))
        if changed:
            found.append(LaterCommit(str(later.id), changed))
    return LaterChanges(tuple(found))


def _entry(tree: pygit2.Tree | None, path: str) -> tuple[str, int] | None:
    """What ``tree`` holds at ``path``: its object ID and mode (None: nothing)."""
    if tree is None:
        return None
    try:
        entry = tree[path]
    except KeyError:
        return None
    return str(entry.id), entry.filemode
