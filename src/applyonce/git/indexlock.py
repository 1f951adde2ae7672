"""A checkout's index, read and written as git does: under ``index.lock`` from read to write.

:func:`locked_index` creates ``index.lock`` exclusively (journaled first, see
:mod:`applyonce.state.lockjournal`) and makes sure the index it hands out is the one on disk; the
caller changes it; :meth:`LockedIndex.commit` has libgit2 write it once, into a private file on
the index's file system, fsyncs that file and renames it over the index while ``index.lock`` is
still held, then releases the lock. A ``git add`` that ran before is in what was read; one that
runs meanwhile finds the lock taken and fails loudly, as between two gits. Nothing is lost. The
lock may be taken before the branch moves, and held until the sync writes the index
(:meth:`applyonce.git.checkouts.Checkouts.holding`), as git holds it while it moves a branch.

Reading a large index costs tens of milliseconds, so the parsed index is kept in memory between
calls (:func:`open_index`, :func:`keep_index`), with the identity of the file it was read from or
written to (device, inode, size, mtime, ctime): while the file keeps that identity, nobody has
replaced it (git writes a new index by renaming a new file over it), and the copy in memory is
used without a read. Anything else reads it again. The index is read through a symbolic link
(that private file's name), so that libgit2 later writes it there, never into ``index.lock``.

libgit2 1.9 cannot read a split index (``core.splitIndex``, the mandatory ``link`` extension) nor
a sparse index (``index.sparse``, ``sdir``): that is an :class:`UnsupportedIndexError`, raised
before anything is written. An index that cannot be read at all (damaged) is an
:class:`UnreadableIndexError`. A skip-worktree entry (a sparse checkout) is written as git
writes it: an index entry without stat data, and no work-tree file
(:mod:`applyonce.git.checkouts` decides which paths get one).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2
from pygit2.errors import check_error
from pygit2.ffi import C, ffi

from applyonce.errors import UsageError
from applyonce.git.store import LockedError
from applyonce.state.files import TMP_PREFIX, ensure_dir
from applyonce.state.lockjournal import HeldLock, LockTakenError, held_lock, stale_lock_hint

INDEX_LOCK_WAIT_S = 3.0  # the user's git holds index.lock for milliseconds; then we give up
KEPT_INDEXES = 8  # parsed indexes kept in memory between calls (tens of MB for 100k files)
_U32 = 0xFFFFFFFF
_SKIP_WORKTREE = 1 << 14  # GIT_INDEX_ENTRY_SKIP_WORKTREE, in an entry's flags_extended

# What tells one index file from another: (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns).
Identity = tuple[int, int, int, int, int]


class UnsupportedIndexError(UsageError):
    """The checkout's index uses a format libgit2 cannot read (a split or sparse index).

    Retryable: the checkout decides, not the patch, so a rejection is never pinned — once the
    user turns the format off, a repeat of the call runs (as for a dirty path)."""

    kind = "unsupported-index"
    default_retryable = True
    default_hint = (
        "turn the split index off: git config core.splitIndex false && "
        "git update-index --no-split-index; then repeat the call"
    )


class UnreadableIndexError(UsageError):
    """The checkout's index is damaged: neither libgit2 nor git can read it (retryable, as
    :class:`UnsupportedIndexError`: once it is repaired, a repeat runs)."""

    kind = "unreadable-index"
    default_retryable = True
    default_hint = (
        "if git status fails too, rebuild the index from HEAD (the work tree stays as it is): "
        "rm <index> && git reset; then repeat the call"
    )


@dataclass
class CheckoutIndex:
    """A checkout's index, parsed: ``identity`` is that of the file it was read from or written
    to (None: unknown, never reused); libgit2 writes it to ``scratch`` (None: it cannot be
    written, it was read where no file could be made beside the index)."""

    path: Path
    index: pygit2.Index
    scratch: Path | None
    identity: Identity | None


_KEPT: dict[Path, CheckoutIndex] = {}  # by index file: the copies kept between calls
_KEPT_LOCK = threading.Lock()


def open_index(
    checkout: pygit2.Repository, *, writes: bool = True, scratch_dir: Path | None = None
) -> CheckoutIndex:
    """The checkout's index as it is on disk: the copy kept by :func:`keep_index` if the file
    has not changed since, else read (once). The caller has it to itself until it keeps it.
    ``writes``: False to make no file at all, even for a moment (a dry run): an index read then
    is not kept. ``scratch_dir``: see :func:`_scratch_name`.

    Raises:
        UnsupportedIndexError: a split or sparse index.
        UnreadableIndexError: a damaged index.
    """
    path = Path(checkout.path) / "index"
    with _KEPT_LOCK:
        kept = _KEPT.pop(path, None)
    if kept is not None and kept.identity is not None and kept.identity == identity_of(path):
        return kept
    if not writes:
        return CheckoutIndex(path, _open(checkout, path, path), None, None)
    return _read(checkout, path, _scratch_name(path, scratch_dir))


def keep_index(held: CheckoutIndex) -> None:
    """Keep ``held`` in memory for the next :func:`open_index` of its checkout (unchanged since
    it was read or written, or it is not kept). A few checkouts at most: the oldest goes."""
    if held.identity is not None and held.scratch is not None:
        with _KEPT_LOCK:
            _KEPT[held.path] = held
            while len(_KEPT) > KEPT_INDEXES:
                del _KEPT[next(iter(_KEPT))]


def identity_of(path: Path) -> Identity | None:
    """The identity of the file at ``path`` (None: there is none)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _scratch_name(index_path: Path, scratch_dir: Path | None) -> Path:
    """A fresh name where libgit2 reads and writes the index (applyonce's temp-file pattern,
    with this pid): in ``scratch_dir`` (the lock journal's folder, private to applyonce) if it is
    on the index's file system, else beside the index. libgit2 writes the index into a lock file
    of its own and renames it, without an fsync: that rename stays out of ``.git``, and only the
    fsynced file is renamed into it. ``recover`` removes what a killed process left there."""
    where = index_path.parent
    if scratch_dir is not None:
        with contextlib.suppress(OSError):
            ensure_dir(scratch_dir)
            if os.stat(scratch_dir).st_dev == os.stat(where).st_dev:
                where = scratch_dir
    return where / f"{TMP_PREFIX}index.{os.getpid()}.{secrets.token_hex(4)}"


def _read(checkout: pygit2.Repository, path: Path, scratch: Path) -> CheckoutIndex:
    """Read the index through a symbolic link at ``scratch`` (no copy): libgit2 then knows the
    index by that name and writes it there. Its identity counts only if the file did not change
    while it was read."""
    before = identity_of(path)
    try:
        os.symlink(os.path.abspath(path), scratch)
    except FileExistsError:
        raise
    except OSError:
        try:  # a file system without symbolic links: a copy, as git's own tools would make
            shutil.copyfile(path, scratch)
        except FileNotFoundError:
            pass  # no index yet: an empty one, written there
        except OSError:
            # Nothing can be made beside the index (a read-only .git): read where it is, for
            # reading only.
            return CheckoutIndex(path, _open(checkout, path, path), None, None)
    try:
        index = _open(checkout, scratch, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(scratch)
    after = identity_of(path)
    return CheckoutIndex(path, index, scratch, before if before == after else None)


def _open(checkout: pygit2.Repository, at: Path, index_path: Path) -> pygit2.Index:
    try:
        return _open_index(at)
    except pygit2.GitError as exc:
        # libgit2 names the file it opened: the user's file is the index itself.
        raise _unsupported(checkout, exc, str(at) if at != index_path else None) from None


# --- lending the index to the checkout's repository ----------------------------------------------


# libgit2 reads a repository's index on its first attribute lookup (attribute files may be in the
# index) and on hashing a work-tree file: tens of milliseconds for a large one, on every
# repository object opened. git_repository_set_index (not in pygit2's API) makes it use the index
# already in memory instead. Without it, libgit2 reads the index itself: slower, as correct.
def _set_index_function() -> Callable[[int, int | None], int] | None:
    try:
        from pygit2 import _libgit2

        function = ctypes.CDLL(_libgit2.__file__).git_repository_set_index
    except (ImportError, OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    function.restype = ctypes.c_int
    return function


_SET_INDEX = _set_index_function()


@contextlib.contextmanager
def lent(checkout: pygit2.Repository, index: pygit2.Index) -> Iterator[None]:
    """For the block, ``checkout``'s attribute lookups and filters use ``index`` (no read of
    their own). Taken back after it: libgit2 then writes the index as an index of no
    repository, as it always has here."""
    if _SET_INDEX is None:
        yield
        return
    repo = int(ffi.cast("uintptr_t", checkout._repo))
    _SET_INDEX(repo, int(ffi.cast("uintptr_t", index._index)))
    try:
        yield
    finally:
        _SET_INDEX(repo, None)


@contextlib.contextmanager
def reading_index(
    checkout: pygit2.Repository, *, writes: bool = True, scratch_dir: Path | None = None
) -> Iterator[pygit2.Index]:
    """The checkout's index for reading (:func:`open_index`), lent to ``checkout`` for the block
    and kept in memory after it.

    Raises:
        UnsupportedIndexError: a split or sparse index.
        UnreadableIndexError: a damaged index.
    """
    held = open_index(checkout, writes=writes, scratch_dir=scratch_dir)
    try:
        with lent(checkout, held.index):
            yield held.index
    finally:
        keep_index(held)  # read only: unchanged, whatever happened


# --- writing it ----------------------------------------------------------------------------------


class LockedIndex:
    """The checkout's index as it is on disk, under the held ``index.lock``."""

    def __init__(self, held: HeldLock, checkout_index: CheckoutIndex) -> None:
        self.held = held
        self.checkout_index = checkout_index
        self.index = checkout_index.index
        self.spoiled = False  # changed in memory and not written: never kept

    def cover(self, paths: Sequence[str]) -> None:
        """Before the holder writes ``paths`` in the work tree: name them in the lock's journal
        entry, if it does not yet (``recover`` then finds their temp files after a kill)."""
        self.held.cover(paths)

    def spoil(self) -> None:
        """The index in memory was changed and will not be written (the write failed): it is
        dropped when the lock is released, never kept as the file's."""
        self.spoiled = True

    def commit(self) -> None:
        """Write the index once (libgit2, beside the index), fsync it, rename it over the index
        while ``index.lock`` is held; keep it in memory with the identity of the new file."""
        held = self.checkout_index
        assert held.scratch is not None
        self.index.write()
        fd = os.open(held.scratch, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.held.install(held.scratch, held.path)
        held.identity = identity_of(held.path)


@contextlib.contextmanager
def locked_index(
    checkout: pygit2.Repository,
    journal: Path,
    paths: Sequence[str],
    *,
    wait: float = INDEX_LOCK_WAIT_S,
) -> Iterator[LockedIndex]:
    """Hold ``index.lock`` of ``checkout`` for the block, with the index as it is on disk
    under it. Leaving the block without :meth:`LockedIndex.commit` means the index was not
    changed (it is kept in memory as it is); an exception, or :meth:`LockedIndex.spoil`, drops
    it. ``paths``: the work-tree files the holder may write (:meth:`LockedIndex.cover` adds
    more).

    Raises:
        LockedError: another writer keeps the lock for longer than ``wait`` seconds.
        UnsupportedIndexError: the index is a split index.
        UnreadableIndexError: the index is damaged.
    """
    index_path = Path(checkout.path) / "index"
    lock = index_path.with_name("index.lock")
    with _KEPT_LOCK:
        kept = _KEPT.pop(index_path, None)
    fresh = _scratch_name(index_path, journal)
    # Where libgit2 may write (and its own lock beside it): recover removes what a kill left.
    scratches = [fresh, *([kept.scratch] if kept is not None and kept.scratch else [])]
    temps = [p for s in scratches for p in (s, s.with_name(s.name + ".lock"))]
    deadline = time.monotonic() + wait
    with contextlib.ExitStack() as stack:
        while True:
            try:
                held = stack.enter_context(
                    held_lock(
                        journal, lock, workdir=Path(checkout.workdir), paths=paths, temps=temps
                    )
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
        # Under the lock: the kept copy serves only if the file is still the one it came from.
        if kept is None or kept.identity is None or kept.identity != identity_of(index_path):
            kept = _read(checkout, index_path, fresh)
            if kept.scratch is None:
                raise UsageError(f"cannot write beside the index {index_path}: .git is read-only")
        locked = LockedIndex(held, kept)
        yield locked
        if not locked.spoiled:
            keep_index(kept)


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
