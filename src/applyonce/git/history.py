"""The Call-Id history index: which commits of a branch carry which ``Call-Id``.

It is a cache of Git, nothing more: rebuilt from the branch whenever it is lost, and never the
record of a call (that is the ledger's). Each refresh reads only the commits since the tip it last
scanned (the whole branch once), so asking "has call X landed on R?" costs the commits since the
last call, not the history. Where the cache is kept is the :class:`HistoryCache`'s business: a
file beside the ledger (:class:`applyonce.state.sqlite.history.SqliteHistoryCache`), or memory.

An incomplete history (a shallow clone, grafts) cannot say "not here": a commit below its cut
may carry the Call-Id. The index is kept per view of the history (what was scanned while the
clone was shallow is scanned again once it is deepened), and :func:`require_complete` is what a
search that found nothing asks before it answers so: it raises :class:`HistoryIncompleteError`
instead. A remote's publisher first makes the clone complete from the remote
(:mod:`applyonce.git.remote`); the repository's own branch has nowhere to ask, so a call there
is refused with the command that fixes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import pygit2

from applyonce.core.revert import REVERTS_TRAILER
from applyonce.errors import ConflictError
from applyonce.git.rereads import rereading
from applyonce.git.store import GitStore

# How far "which later commits changed these paths" looks: the commits walked from the tip, and
# the commits listed. A repeat answers at once, whatever the length of the branch since.
LATER_WALK_LIMIT = 1000
LATER_LISTED = 5


class HistoryIncompleteError(ConflictError):
    """The history a Call-Id search needs is not all here (a shallow clone, grafts), so it
    cannot tell that a call has not landed: nothing runs, rather than a call landing twice."""

    kind = "history-incomplete"
    default_retryable = True
    default_hint = (
        "make the clone complete ('git fetch --unshallow'; or pass --remote NAME, which"
        " deepens it from that remote), then repeat"
    )


# The hint when the clone was deepened from the remote and is still cut short.
REMOTE_INCOMPLETE_HINT = (
    "the remote's own history is cut short (a shallow server) or this clone has grafts"
    " (info/grafts); publish to a remote with the whole history, then repeat"
)


# What cannot be known without the whole history: by default, what a call's search asks.
UNKNOWN_LANDED = "whether a call already landed on it cannot be known"


def require_complete(
    store: GitStore,
    ref: str,
    tip: str | None,
    *,
    hide: str | None = None,
    hint: str | None = None,
    unknown: str = UNKNOWN_LANDED,
) -> None:
    """Make sure a walk of ``ref`` from ``tip`` (down to ``hide``) sees every commit of it.

    Args:
        unknown: what cannot be known without those commits, as the error says it.

    Raises:
        HistoryIncompleteError: commits below a shallow boundary or a graft are missing here.
    """
    hidden = store.hidden_below(tip, hide=hide)
    if not hidden:
        return
    what = "a shallow clone" if store.is_shallow() else "grafted (info/grafts)"
    raise HistoryIncompleteError(
        f"the history of {ref} is incomplete here ({what}: the parents of"
        f" {hidden[0][:12]} are missing), so {unknown}",
        hint=hint,
        ref=ref,
        cut=hidden[0],
    )


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
        # private ref the remote's branch was last fetched into.
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

    def _view(self, ref: str) -> str:
        """The cache's key for ``ref`` as this repository sees its history now: the ref
        itself, or, while commits are cut off (shallow, grafted), the ref and those cuts. A
        scan made while the clone was shallow never stands for the deepened history (its
        "scanned up to the tip" would skip every commit the deepening brought)."""
        cuts = self.store.history_cuts()
        if not cuts:
            return ref
        digest = hashlib.sha256(" ".join(sorted(cuts)).encode()).hexdigest()[:16]
        return f"{ref} cut:{digest}"

    def refresh(self, ref: str) -> str | None:
        """Bring the index of ``ref`` up to date; returns the tip (None: no such branch)."""
        tip = self.tip_of(ref)
        if tip is None:
            return None
        view = self._view(ref)
        last = self.cache.scanned_tip(view)
        if last != tip:
            hide = last if last is not None and self.store.has_object(last) else None
            found = [
                (call, commit)
                for commit, block in self.store.walk_trailers(tip, hide=hide, key="Call-Id")
                for call in block.all("Call-Id")
            ]
            self.cache.add(view, found, tip)
        return tip

    def commits_on(self, ref: str, call_id: str) -> list[str]:
        """The commits carrying ``call_id`` that the branch has now, newest first.

        Raises:
            HistoryIncompleteError: none is found, and commits of the branch are missing here.
        """
        tip = self.refresh(ref)
        if tip is None:
            return []
        found = [
            commit
            for commit in self.cache.commits(self._view(ref), call_id)
            if self.store.has_object(commit) and self.store.is_ancestor(commit, tip)
        ]
        if not found:
            require_complete(self.store, ref, tip)
        return found

    def calls(self, ref: str) -> dict[str, list[str]]:
        """Call-Id → commits ever seen on ``ref`` (some may be gone from it since), refreshed
        (of a shallow clone: those above its boundary)."""
        self.refresh(ref)
        return self.cache.calls(self._view(ref))


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


@rereading
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


def undone_by(
    store: GitStore, tip: str, commit: str, *, walk_limit: int = LATER_WALK_LIMIT
) -> str | None:
    """The commit after ``commit`` on the branch at ``tip`` that undid it, if one did: one
    ``git revert`` made (its message says ``This reverts commit <id>``), or one that put every
    path ``commit`` changed back as it was before ``commit``, from as ``commit`` left it (an
    undo by hand). None when none did among the ``walk_limit`` newest commits after it.
    """
    parent = store.parent_of(commit)
    paths = sorted(store.paths_changed(parent, commit))
    before = store.repo[parent].peel(pygit2.Tree) if parent is not None else None
    after = store.repo[commit].peel(pygit2.Tree)
    marker = f"This reverts commit {commit}".encode()
    for walked, later in enumerate(store.commits(tip, hide=commit)):
        if walked >= walk_limit:
            return None
        if marker in later.raw_message:
            return str(later.id)
        if not later.parents:
            continue
        from_after = all(_entry(later.parents[0].tree, p) == _entry(after, p) for p in paths)
        if from_after and all(_entry(later.tree, p) == _entry(before, p) for p in paths):
            return str(later.id)
    return None


def reverted_by(
    store: GitStore,
    tip: str,
    commit: str,
    call_id: str,
    *,
    walk_limit: int = LATER_WALK_LIMIT,
) -> tuple[str, str] | None:
    """The commit after ``commit`` on the branch at ``tip`` that reverted the call ``call_id``
    made it with, and how: ``applyonce`` (its ``Reverts-Call-Id`` trailer names the call),
    ``git`` (``This reverts commit <id>``) or ``hand`` (every path put back, see
    :func:`undone_by`). None when none did among the ``walk_limit`` newest commits after it."""
    marker = f"{REVERTS_TRAILER}: {call_id}".encode()
    for walked, later in enumerate(store.commits(tip, hide=commit)):
        if walked >= walk_limit:
            break
        if marker in later.raw_message:
            return str(later.id), "applyonce"
    found = undone_by(store, tip, commit, walk_limit=walk_limit)
    if found is None:
        return None
    said = (
        f"This reverts commit {commit}".encode()
        in store.repo[found].peel(pygit2.Commit).raw_message
    )
    return found, "git" if said else "hand"


def _entry(tree: pygit2.Tree | None, path: str) -> tuple[str, int] | None:
    """What ``tree`` holds at ``path``: its object ID and mode (None: nothing)."""
    if tree is None:
        return None
    try:
        entry = tree[path]
    except KeyError:
        return None
    return str(entry.id), entry.filemode
