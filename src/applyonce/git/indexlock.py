"""A checkout's index, read and written as git does: under ``index.lock`` from read to write.

:func:`locked_index` creates ``index.lock`` exclusively (journaled first, see
:mod:`applyonce.state.lockjournal`), copies the index to a private file and opens that copy; the
caller changes it; :meth:`LockedIndex.commit` puts the new bytes into the held lock and renames
it over the index. A ``git add`` that ran before holds its change in the copy; one that runs
meanwhile finds the lock taken and fails loudly, as between two gits. Nothing is lost.

libgit2 1.9 cannot read a split index (``core.splitIndex``, the mandatory ``link`` extension) nor
a sparse index (``index.sparse``, ``sdir``): that is an :class:`UnsupportedIndexError`, raised
before anything is written. An index that cannot be read at all (damaged) is an
:class:`UnreadableIndexError`. A skip-worktree entry (a sparse checkout) is kept as git keeps it:
its index entry is updated, its work-tree file ignored.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pygit2
from pygit2.errors import check_error
from pygit2.ffi import C, ffi

from applyonce.errors import UsageError
from applyonce.git.store import LockedError
from applyonce.state.lockjournal import HeldLock, LockTakenError, held_lock, stale_lock_hint

INDEX_LOCK_WAIT_S = 3.0  # the user's git holds index.lock for milliseconds; then we give up
_U32 = 0xFFFFFFFF
_SKIP_WORKTREE = 1 << 14  # GIT_INDEX_ENTRY_SKIP_WORKTREE, in an entry's flags_extended


class UnsupportedIndexError(UsageError):
    """The checkout's index uses a format libgit2 cannot read (a split or sparse index)."""

    kind = "unsupported-index"
    default_hint = (
        "turn the split index off: git config core.splitIndex false && "
        "git update-index --no-split-index; then repeat the call"
    )


class UnreadableIndexError(UsageError):
    """The checkout's index is damaged: neither libgit2 nor git can read it."""

    kind = "unreadable-index"
    default_hint = (
        "if git status fails too, rebuild the index from HEAD (the work tree stays as it is): "
        "rm <index> && git reset; then repeat the call"
    )


def read_index(checkout: pygit2.Repository) -> pygit2.Index:
    """The checkout's index as it is on disk (for reading only).

    Raises:
        UnsupportedIndexError: a split index (or another extension libgit2 cannot read).
        UnreadableIndexError: a damaged index.
    """
    try:
        index: pygit2.Index = checkout.index
        index.read(False)
    except pygit2.GitError as exc:
        raise _unsupported(checkout, exc) from None
    return index


class LockedIndex:
    """A private copy of the index, opened under the held ``index.lock``."""

    def __init__(self, held: HeldLock, index_path: Path, index: pygit2.Index) -> None:
        self.held = held
        self.index_path = index_path
        self.index = index

    def commit(self) -> None:
        """Write the changed copy, put it into the held lock (fsynced), rename it over the index."""
        self.index.write()
        self.held.replace(self.held.scratch.read_bytes(), self.index_path)


@contextlib.contextmanager
def locked_index(
    checkout: pygit2.Repository, journal: Path, paths: Sequence[str]
) -> Iterator[LockedIndex]:
    """Hold ``index.lock`` of ``checkout`` for the block, with the index read under it.

    Raises:
        LockedError: another writer keeps the lock for longer than :data:`INDEX_LOCK_WAIT_S`.
        UnsupportedIndexError: the index is a split index.
        UnreadableIndexError: the index is damaged.
    """
    index_path = Path(checkout.path) / "index"
    lock = index_path.with_name("index.lock")
    deadline = time.monotonic() + INDEX_LOCK_WAIT_S
    with contextlib.ExitStack() as stack:
        while True:
            try:
                held = stack.enter_context(
                    held_lock(journal, lock, workdir=Path(checkout.workdir), paths=paths)
                )
                break
            except LockTakenError:
                if time.monotonic() >= deadline:
                    raise LockedError(
                        f"{lock} stays held by another git process",
                        path=str(lock),
                        hint=stale_lock_hint(journal, lock),
                    ) from None
                time.sleep(0.02)
        with contextlib.suppress(FileNotFoundError), open(index_path, "rb") as source:
            # The copy is 0600, as all of applyonce's state (none at all without an index).
            fd = os.open(held.scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as copy:
                shutil.copyfileobj(source, copy)
        try:
            index = _open_index(held.scratch)
        except pygit2.GitError as exc:
            # libgit2 names the private copy: the user's file is the index itself.
            raise _unsupported(checkout, exc, str(held.scratch)) from None
        yield LockedIndex(held, index_path, index)


def skips_worktree(index: pygit2.Index, path: str) -> bool:
    """Whether ``path``'s index entry has the skip-worktree bit (outside a sparse checkout's
    patterns, or ``git update-index --skip-worktree``): git then ignores the work tree's file."""
    centry = C.git_index_get_bypath(index._index, os.fsencode(path), 0)
    return centry != ffi.NULL and bool(centry.flags_extended & _SKIP_WORKTREE)


def stage_file(index: pygit2.Index, path: str, blob: str, mode: int, full: Path | None) -> None:
    """Record ``blob`` with ``mode`` for ``path``, with the stat data of the file just written
    at ``full`` — as ``git checkout`` does, so git sees the file as clean without re-reading it.
    The blob is the commit's: a work-tree file that went through a smudge filter would not hash
    to it, so it is not re-hashed here. ``full`` None: a skip-worktree entry, which git keeps
    without a work-tree file (no stat data, the bit kept)."""
    entry = ffi.new("git_index_entry *")
    entry.mode = mode
    ffi.buffer(ffi.addressof(entry, "id"))[:] = pygit2.Oid(hex=blob).raw
    c_path = ffi.new("char[]", os.fsencode(path))
    entry.path = c_path
    if full is None:
        entry.flags_extended = _SKIP_WORKTREE
        check_error(C.git_index_add(index._index, entry))
        return
    st = os.lstat(full)
    entry.ctime.seconds = int(st.st_ctime) & 0x7FFFFFFF
    entry.ctime.nanoseconds = st.st_ctime_ns % 1_000_000_000
    entry.mtime.seconds = int(st.st_mtime) & 0x7FFFFFFF
    entry.mtime.nanoseconds = st.st_mtime_ns % 1_000_000_000
    entry.dev = st.st_dev & _U32
    entry.ino = st.st_ino & _U32
    entry.uid = st.st_uid & _U32
    entry.gid = st.st_gid & _U32
    entry.file_size = (
        st.st_size if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) else 0
    ) & _U32
    check_error(C.git_index_add(index._index, entry))


def _open_index(path: Path) -> pygit2.Index:
    """``pygit2.Index(path)``, but a file libgit2 cannot read leaves no half-built object behind
    (whose ``__del__`` would print "Exception ignored ... AttributeError" on stderr)."""
    cindex = ffi.new("git_index **")
    check_error(C.git_index_open(cindex, os.fsencode(path)))
    return pygit2.Index.from_c(None, cindex)  # type: ignore[no-untyped-call,no-any-return]


def _unsupported(
    checkout: pygit2.Repository, exc: pygit2.GitError, read_from: str | None = None
) -> Exception:
    index_path = str(Path(checkout.path) / "index")
    text = str(exc).replace(read_from, index_path) if read_from else str(exc)
    if "'sdir'" in text:  # the sparse-directory entries of a sparse index
        return UnsupportedIndexError(
            f"the index of the checkout at {checkout.workdir} is a sparse index "
            f"(index.sparse), which libgit2 cannot read ({text})",
            # (git 2.39: 'reapply' with index.sparse=false leaves an unchanged index as it is)
            hint="expand it (your sparse patterns stay): git sparse-checkout init "
            "--no-sparse-index; then repeat the call",
        )
    if "extension" in text:
        return UnsupportedIndexError(
            f"the index of the checkout at {checkout.workdir} is a split index "
            f"(core.splitIndex), which libgit2 cannot read ({text})"
        )
    return UnreadableIndexError(
        f"the index of the checkout at {checkout.workdir} is damaged: {index_path} "
        f"{_damage(Path(index_path), text)}",
        path=index_path,
        hint=UnreadableIndexError.default_hint.replace("<index>", index_path),
    )


def _damage(index_path: Path, text: str) -> str:
    """What is wrong with the index file, in words (libgit2 says "no longer exists" of a file
    that exists with a bad header)."""
    try:
        with open(index_path, "rb") as stream:
            header = stream.read(12)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if len(header) < 12 or header[:4] != b"DIRC" or int.from_bytes(header[4:8]) not in (2, 3, 4):
        return "has no valid index header"
    return f"cannot be read ({text})"
