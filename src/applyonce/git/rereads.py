"""Reads that outlast git's housekeeping replacing the packs under them.

libgit2 lists a repository's packs and maps its multi-pack-index once, and looks at the
``objects/pack`` folder again only when an object is found nowhere. Meanwhile ``git repack -a
-d``, ``git gc`` and ``git maintenance`` (``incremental-repack``: ``git multi-pack-index repack``,
then ``expire``) write new packs and delete the ones they replace. An object libgit2 still finds
in what it read before — a multi-pack-index that names a pack that is gone, or a pack whose
index it had read but whose ``.pack`` it had not opened yet — is then not "missing" but
``invalid packfile``, and libgit2 does not look again: that read fails, and so does every later
read of that object by the same repository object (seen as calls that failed one after another,
each a traceback).

Every read of objects applyonce makes runs under a :class:`Rereader` (:func:`rereading` on the
methods of :mod:`applyonce.git.store` and the modules beside it): when a read fails that way,
the repository's view of the objects is dropped (``Repository.free()``: packs, multi-pack-index
and object cache are read afresh on the next access; see
:meth:`applyonce.git.store.GitStore.reread_objects`) and the read runs again, a bounded number of
times. git keeps every object that is reachable, and a call's own objects are kept in packs git
neither repacks nor deletes (:mod:`applyonce.git.objects`), so the read that runs again finds the
object in the pack that replaced the old one. A read that still fails that way is
:class:`ObjectsUnreadableError` (exit 4, retryable): the call is rejected as one to repeat, and
nothing is published — never a traceback, never a wrong answer. An object libgit2 says is not
found is looked for once more the same way (a pack it had not listed yet), then reported as
missing, as before.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Hashable, Iterator
from typing import Concatenate, ParamSpec, Protocol, TypeVar

import pygit2

from applyonce.errors import ApplyOnceError, ConflictError

# How many times a read that failed on a replaced pack runs again (each after the repository's
# view of the objects is dropped), and how long it waits first: a repack that is deleting packs
# right now has written the packs that replace them already.
REREADS = 3
_WAITS_S = (0.0, 0.05, 0.2)

# libgit2's words for a pack it cannot use (its error class is GIT_ERROR_OS, an OSError without
# an errno, or another GitError): a pack, its index or a multi-pack-index that went away. Some
# calls put their own words over the read's: a tree entry whose object it was to check ("invalid
# object specified"; also after a write libgit2 skipped, as it "freshens" an object it finds in a
# pack instead of writing it again, and found it through a stale multi-pack-index in a pack that
# is gone), an object it was to follow (a commit's tree: "can not be successfully peeled").
_UNREADABLE = re.compile(
    r"packfile|pack file|multi-pack-index|midx|/objects/pack/|invalid object specified"
    r"|can not be successfully peeled",
    re.IGNORECASE,
)
# libgit2's "not found" for an object (pygit2: a KeyError with that text, or with the ID alone;
# or with the words of the call that was following it, a commit to its tree).
_NOT_FOUND = re.compile(
    r"object not found|no match for id|failed to open packfile|can not be successfully peeled",
    re.IGNORECASE,
)
_OBJECT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


class ObjectsUnreadableError(ConflictError):
    """Objects could not be read though the repository has them: git's housekeeping kept
    replacing the packs that hold them while they were read (or a pack is damaged)."""

    kind = "objects-unreadable"
    default_retryable = True
    default_hint = (
        "nothing was published; repeat the call (if it fails again with no git gc, repack or"
        " maintenance running, 'git fsck' tells whether the repository is damaged)"
    )


def unreadable_object(exc: BaseException) -> bool:
    """Whether ``exc`` is libgit2 failing on a pack that was replaced (or damaged): an object
    the repository has that it could not read. Also for a caller that would otherwise take it
    for another refusal of libgit2's."""
    if isinstance(exc, ApplyOnceError) or not isinstance(exc, (OSError, pygit2.GitError)):
        return False
    if isinstance(exc, OSError) and exc.errno is not None:
        return False  # a file applyonce itself opened: its own error, not libgit2's
    return _UNREADABLE.search(str(exc)) is not None


def _not_found(exc: BaseException) -> bool:
    """Whether ``exc`` is libgit2 (or pygit2) saying an object is not found."""
    if isinstance(exc, ApplyOnceError):
        return False
    if isinstance(exc, KeyError):
        named = str(exc.args[0]) if exc.args else ""
        return _OBJECT_ID.fullmatch(named) is not None or _NOT_FOUND.search(named) is not None
    if isinstance(exc, pygit2.GitError):
        return _NOT_FOUND.search(str(exc)) is not None
    return False


T = TypeVar("T")


class Rereader:
    """Runs reads of one repository object, reading again after its view of the objects is
    dropped (``reopen``) where a read failed on a pack git replaced meanwhile (see the module
    docstring)."""

    def __init__(self, reopen: Callable[[], None]) -> None:
        self.reopen = reopen

    def run(self, read: Callable[[], T]) -> T:
        """``read()``, run again while it fails on a replaced pack.

        Raises:
            ObjectsUnreadableError: it still failed so after :data:`REREADS` more times.
        """
        attempt = 0
        while True:
            try:
                return read()
            except Exception as exc:  # judged, and raised again if not a replaced pack
                self._again(exc, attempt)
            attempt += 1

    def iterate(self, walk: Callable[[], Iterator[T]], key: Callable[[T], Hashable]) -> Iterator[T]:
        """The items of ``walk()``; a walk that fails on a replaced pack starts again and goes
        on after the items it gave (a walk gives the same items in the same order each time:
        ``key`` checks the last one given).

        Raises:
            ObjectsUnreadableError: it still failed so after :data:`REREADS` more times, or
                the walk started again did not give the same items.
        """
        given = 0
        last: Hashable = None
        attempt = 0
        while True:
            try:
                for position, item in enumerate(walk()):
                    if position < given:
                        if position == given - 1 and key(item) != last:
                            raise ObjectsUnreadableError(
                                "the history read again after git replaced its packs did not"
                                " give the same commits"
                            )
                        continue
                    given, last = given + 1, key(item)
                    yield item
                return
            except Exception as exc:  # judged, and raised again if not a replaced pack
                self._again(exc, attempt)
            attempt += 1

    def _again(self, exc: Exception, attempt: int) -> None:
        """Whether to read again after ``exc`` on try ``attempt`` (from 0): returns to do so,
        after dropping the repository's view of the objects; raises otherwise."""
        if _not_found(exc) and attempt == 0:
            self.reopen()  # a pack libgit2 had not listed yet: looked for once more
            return
        if not unreadable_object(exc):
            raise exc
        if attempt >= REREADS:
            raise ObjectsUnreadableError(
                f"cannot read objects of the repository ({_said(exc)}): git's housekeeping"
                " (gc, repack, maintenance) kept replacing the packs while they were read, or"
                " a pack is damaged",
                cause=_said(exc),
            ) from exc
        time.sleep(_WAITS_S[min(attempt, len(_WAITS_S) - 1)])
        self.reopen()


def _said(exc: BaseException) -> str:
    return " ".join(str(exc).split()).rstrip(": ")


class Rereading(Protocol):
    """What :func:`rereading` reads through: an object with a :class:`Rereader`."""

    @property
    def rereader(self) -> Rereader: ...


S = TypeVar("S", bound=Rereading)
P = ParamSpec("P")


def rereading(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """Run ``method`` (of an object with a ``rereader``, or a function whose first argument has
    one: the store) under its :class:`Rereader`: again, after the repository's view of the
    objects is dropped, where it failed on a pack git replaced meanwhile. Only for reads: a
    method that wrote something before the failing read must write it again the same way."""

    @functools.wraps(method)
    def read(owner: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return owner.rereader.run(lambda: method(owner, *args, **kwargs))

    return read
