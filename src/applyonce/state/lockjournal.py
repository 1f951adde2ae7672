"""Git lock files that applyonce takes in the user's repository, each provably its own.

A Git lock file (``index.lock``) says nothing about who made it: the user's ``git commit`` waiting
for its editor leaves one that no process holds open, just like a killed writer does. So applyonce
removes a lock only when it can prove it made it:

1. before the lock is created, a journal entry (``<state>/locks/<nonce>.json``: the lock's path,
   a marker unique to this taking, the pid) is written and fsynced;
2. the lock is created exclusively (``O_CREAT|O_EXCL``, as git does) and holds the marker (not
   fsynced: after a power cut the lock may hold a part of it, or nothing);
3. before the new content replaces the marker, its SHA-256 is added to the entry; the
   content is put in place by renaming a complete temp file over the lock, so the lock holds, at
   every moment, the marker or the whole new content — both recorded;
4. the lock is renamed over its target, then the entry is removed.

Or, with :meth:`HeldLock.install` (the index: libgit2 writes it once, beside it), steps 3-4 are:
the complete, fsynced new file is renamed over the target while the lock still holds the marker
(no writer that respects the lock can touch the target meanwhile), then the lock is removed and
its directory fsynced (the rename and the removal durable together), then the entry is removed.
The lock never holds anything but the marker, and the entry names the holder's temp files
(``temps``), which ``recover`` removes too.

:func:`remove_own_locks` (``applyonce recover``) removes a journaled lock only if its content is
the marker or the recorded content, or a part of the marker (nothing, after a power cut) in a lock
made right after the entry; anything else is someone else's and stays. It judges these entries
only while no holder can be running: the caller holds the sync lock, which every holder holds
from before it takes the lock until it is gone (a sync; a publish and the sync after it), so the
owner is dead.

A branch's ref lock is taken by libgit2 during the publish, not by applyonce, so it cannot carry a
marker. :func:`journaled_ref_lock` journals it before libgit2 is called: the lock's path, the ref,
the value the ref must still have (``expected``) and the bytes libgit2 writes into the lock (the
new oid and a newline, in one write after the reflog is appended; a killed publish leaves the lock
empty or holding them). The entry is ``flock``-ed by its holder while it exists, so a live holder
is told from a dead one without the sync lock, across PID namespaces too. Such a lock is the dead
holder's, and removed, only if all of these hold:

* its content is a prefix of the bytes libgit2 writes (empty, partial or whole);
* it was made soon after the entry was written: libgit2 creates it a millisecond later (an empty
  lock: within :data:`REF_LOCK_TAKEN_WITHIN_S`), and fills it after appending the reflogs, each
  fsynced (within :data:`REF_LOCK_FILLED_WITHIN_S`); a lock someone took later, once the holder
  was dead, is younger;
* the ref still has the ``expected`` value: while that lock stands no git can have moved it, and a
  publish that completed moved it away from ``expected``.

A pack's ``.keep`` file (:mod:`applyonce.git.packs`: git never deletes or repacks a kept pack)
is taken the same way (:func:`take_keep`): an entry ``flock``-ed by its holder is written first,
naming the ``.keep`` and a marker unique to this taking; then the ``.keep`` is created
exclusively, holding the marker. :meth:`HeldKeep.release` removes both. :func:`remove_dead_keeps`
(``applyonce recover``, once it has settled the calls a dead holder left) removes a ``.keep``
only if its holder is dead (the entry's ``flock`` is free) and it holds the marker; a ``.keep``
of anyone else (``git index-pack --keep``, the user's) stays.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import secrets
import stat
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import orjson

from applyonce.state.files import (
    PRIVATE_FILE,
    TMP_PREFIX,
    atomic_write,
    ensure_dir,
    fsync_dir,
    pid_alive,
    stale_temp_files,
    write_all,
    write_new,
)

MARKER_PREFIX = b"applyonce lock "
KEEP_PREFIX = b"applyonce keep "
JOURNAL_DIR = "locks"  # under the state directory
REF_LOCK_TAKEN_WITHIN_S = 2.0
REF_LOCK_FILLED_WITHIN_S = 60.0


class LockTakenError(Exception):
    """The lock file already exists: someone else (the user's git, libgit2) holds it."""


class HeldLock:
    """A Git lock file applyonce created and holds; :meth:`replace` ends it by a rename."""

    def __init__(self, lock: Path, entry: Path, record: dict[str, object]) -> None:
        self.lock = lock
        self.entry = entry
        self.record = record
        self.scratch = entry.with_suffix(".data")  # a private file the holder may use
        self.done = False
        self.installed: set[Path] = set()  # directories renamed into, made durable on release

    def replace(self, data: bytes, target: Path) -> None:
        """Make ``data`` the content of ``target``: into the lock (fsynced), then rename."""
        tmp = (
            self.lock.parent / f"{TMP_PREFIX}{self.lock.name}.{os.getpid()}.{secrets.token_hex(4)}"
        )
        self.record["sha256"] = hashlib.sha256(data).hexdigest()
        self.record["tmp"] = str(tmp)
        # Recorded before the lock holds it. Not fsynced: a killed process loses nothing from the
        # page cache, and after a power cut an unrecorded lock is only reported, never removed.
        atomic_write(self.entry, orjson.dumps(self.record), durable=False)
        try:
            write_new(tmp, data, mode=0o644)
            os.replace(tmp, self.lock)  # the lock exists throughout: nobody can take it
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        os.replace(self.lock, target)
        fsync_dir(target.parent)
        self.done = True

    def cover(self, paths: Sequence[str]) -> None:
        """Name ``paths`` (work-tree files the holder is about to write) in the entry too, if it
        does not yet, so that ``recover`` finds their temp files after a kill. The marker is
        made durable first: the entry's new date no longer tells that the lock was made right
        after it (an empty lock after a power cut is proven the holder's only by that)."""
        known = self.record.get("paths")
        named = [str(p) for p in known] if isinstance(known, list) else []
        new = [path for path in paths if path not in named]
        if not new:
            return
        fd = os.open(self.lock, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        self.record["paths"] = [*named, *new]
        atomic_write(self.entry, orjson.dumps(self.record))

    def install(self, new: Path, target: Path) -> None:
        """Make the complete, durable file ``new`` ``target`` by a rename, while the lock still
        holds its marker: no writer that respects the lock can change ``target`` meanwhile. The
        lock is removed when the holder leaves :func:`held_lock`, and one fsync of the directory
        then makes the rename and the lock's removal durable together; a lock left by a kill
        holds the marker, and ``recover`` removes it."""
        os.replace(new, target)
        self.installed.add(target.parent)


@contextlib.contextmanager
def held_lock(
    journal: Path,
    lock: Path,
    *,
    workdir: Path | None = None,
    paths: Sequence[str] = (),
    temps: Sequence[Path] = (),
) -> Iterator[HeldLock]:
    """Create ``lock`` exclusively after journaling it; remove it on leaving unless replaced.

    ``workdir`` and ``paths``: the work-tree files the holder may write while it holds the lock,
    so that ``recover`` can find their temp files if it is killed. ``temps``: files of the
    holder's own (unique names) it may leave if killed, removed by ``recover`` and on leaving.

    Raises:
        LockTakenError: the lock file exists (another writer holds it); nothing is left behind.
    """
    ensure_dir(journal)
    nonce = secrets.token_hex(8)
    marker = MARKER_PREFIX + f"{nonce} pid {os.getpid()}\n".encode()
    record: dict[str, object] = {
        "lock": str(lock),
        "marker": marker.decode(),
        "sha256": None,
        "pid": os.getpid(),
        "workdir": str(workdir) if workdir is not None else None,
        "paths": list(paths),
        "temps": [str(temp) for temp in temps],
    }
    entry = journal / f"{nonce}.json"
    atomic_write(entry, orjson.dumps(record))  # durable before the lock exists
    try:
        fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        os.unlink(entry)
        raise LockTakenError(str(lock)) from None
    except BaseException:
        os.unlink(entry)
        raise
    held = HeldLock(lock, entry, record)
    try:
        try:
            os.write(fd, marker)
        finally:
            os.close(fd)
        yield held
    finally:
        if not held.done:
            if _is_ours(lock, record):  # (unless someone rm'ed it and retook it)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(lock)
            # The lock's removal is durable before its entry's: after a power cut, a lock is
            # never left without the entry that proves it applyonce's (nor an installed file's
            # rename lost while the lock's removal stands).
            for directory in sorted({lock.parent, *held.installed}):
                fsync_dir(directory)
        for private in (held.scratch, held.scratch.with_suffix(".data.lock"), *temps):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(private)
        os.unlink(entry)


@contextlib.contextmanager
def journaled_ref_lock(
    journal: Path, lock: Path, *, ref: str, expected: str | None, content: bytes
) -> Iterator[None]:
    """Journal ``lock``, which libgit2 takes (and fills with ``content``) to move ``ref`` from
    ``expected`` while the block runs; the entry is removed when the block ends, however it ends.

    Costs no fsync: a killed process loses nothing from the page cache, and after a power cut a
    lock whose entry was lost is only reported, never removed. The entry appears complete and
    already ``flock``-ed (written to a temp file, locked, renamed)."""
    record = {
        "kind": "ref",
        "lock": str(lock),
        "ref": ref,
        "expected": expected,
        "content": content.decode(),
        "pid": os.getpid(),
    }
    entry, fd = _flocked_entry(journal, record)
    try:
        yield
    finally:
        _drop_entry(entry, fd)


def _flocked_entry(journal: Path, record: Mapping[str, object]) -> tuple[Path, int]:
    """Write ``record`` as a new journal entry that appears complete and already ``flock``-ed
    (written to a temp file, locked, renamed). Returns it and the descriptor holding the flock.
    Not fsynced: a killed process loses nothing from the page cache."""
    ensure_dir(journal)
    entry = journal / f"{secrets.token_hex(8)}.json"
    tmp = journal / f"{TMP_PREFIX}{entry.name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        write_all(fd, orjson.dumps(record))
        os.rename(tmp, entry)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return entry, fd


def _drop_entry(entry: Path, fd: int) -> None:
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry)  # while still flock-ed: recover never judges a live holder's
    finally:
        os.close(fd)


class HeldKeep:
    """A pack's ``.keep`` file this process made (see the module docstring); :meth:`release`
    removes it. ``entry``/``fd``: its journal entry and the descriptor holding its flock (None:
    not journaled)."""

    def __init__(self, keep: Path, marker: bytes, entry: Path | None, fd: int | None) -> None:
        self.keep = keep
        self.marker = marker
        self._entry = entry
        self._fd = fd
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        """Remove the ``.keep`` (if it still holds the marker), then the journal entry. Safe to
        call more than once."""
        with self._lock:
            if self._released:
                return
            self._released = True
            try:
                if _holds(self.keep, self.marker):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(self.keep)
            finally:
                if self._entry is not None and self._fd is not None:
                    _drop_entry(self._entry, self._fd)


def take_keep(journal: Path | None, keep: Path) -> HeldKeep:
    """Create the ``.keep`` file ``keep`` exclusively, journaled in ``journal`` first (None:
    not journaled: a killed holder's ``.keep`` then stays).

    Raises:
        LockTakenError: ``keep`` exists (another writer's); nothing is left behind.
    """
    marker = KEEP_PREFIX + f"{secrets.token_hex(8)} pid {os.getpid()}\n".encode()
    entry: Path | None = None
    fd: int | None = None
    if journal is not None:
        record = {"kind": "keep", "lock": str(keep), "marker": marker.decode(), "pid": os.getpid()}
        entry, fd = _flocked_entry(journal, record)
    try:
        made = os.open(keep, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except BaseException as exc:
        if entry is not None and fd is not None:
            _drop_entry(entry, fd)
        if isinstance(exc, FileExistsError):
            raise LockTakenError(str(keep)) from None
        raise
    try:
        write_all(made, marker)
    finally:
        os.close(made)
    return HeldKeep(keep, marker, entry, fd)


def remove_dead_keeps(journal: Path) -> list[str]:
    """Remove the ``.keep`` files of :func:`take_keep` holders that died (their entry's flock is
    free) and that still hold their marker, and those entries; returns the paths removed."""
    removed: list[str] = []
    if not journal.is_dir():
        return removed
    for entry in sorted(journal.glob("*.json")):
        try:
            record = orjson.loads(entry.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        if record.get("kind") != "keep":
            continue
        keep, marker = record.get("lock"), record.get("marker")
        if not isinstance(keep, str) or not isinstance(marker, str):
            continue
        with _dead_holder(entry) as dead:
            if not dead:
                continue
            if _holds(Path(keep), marker.encode()):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(keep)
                    removed.append(keep)
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()
    return removed


@contextlib.contextmanager
def _dead_holder(entry: Path) -> Iterator[bool]:
    """Whether the holder of the flock-ed ``entry`` is dead (its flock free, taken here for the
    block); False also when the entry is gone (its holder finished meanwhile)."""
    try:
        fd = os.open(entry, os.O_RDWR)
    except FileNotFoundError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def _holds(path: Path, marker: bytes) -> bool:
    """Whether ``path`` is a regular file holding exactly ``marker``."""
    try:
        st = os.lstat(path)
        return stat.S_ISREG(st.st_mode) and path.read_bytes() == marker
    except OSError:
        return False


def remove_own_locks(
    journal: Path,
    *,
    holders_dead: bool = True,
    ref_at: Callable[[str], str | None] | None = None,
) -> list[str]:
    """Remove what killed holders left: their lock files (only those proven theirs), temp files
    and work-tree temp files; returns the paths removed.

    ``holders_dead``: the caller holds the lock every :func:`held_lock` holder takes, so their
    entries can be judged (False: they are left for later). ``ref_at``: a ref's current value
    (None: no such ref), to judge the entries of :func:`journaled_ref_lock`, whose holders are
    told alive by their ``flock`` (None: those entries are left)."""
    removed: list[str] = []
    if not journal.is_dir():
        return removed
    for tmp in stale_temp_files(journal):  # an entry's own write, killed
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(str(tmp))
    for entry in sorted(journal.glob("*.json")):
        try:
            record = orjson.loads(entry.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue  # a torn entry: its lock, if any, cannot be proven ours
        if record.get("kind") == "ref":
            if ref_at is not None:
                removed.extend(_remove_dead_ref_lock(entry, record, ref_at))
            continue
        if record.get("kind") == "keep":
            continue  # judged by remove_dead_keeps, once the calls are settled
        if not holders_dead:
            continue
        pid = record.get("pid")
        if isinstance(pid, int) and pid != os.getpid() and pid_alive(pid):
            continue
        lock = Path(str(record.get("lock")))
        try:
            written_at: float | None = entry.stat().st_mtime
        except OSError:
            written_at = None
        if _is_ours(lock, record, written_at):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
                removed.append(str(lock))
        temps = record.get("temps")
        for tmp in [record.get("tmp"), *(temps if isinstance(temps, list) else [])]:
            if isinstance(tmp, str):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                    removed.append(tmp)
        removed.extend(_remove_worktree_temps(record))
        for private in (entry.with_suffix(".data"), entry.with_suffix(".data.lock"), entry):
            with contextlib.suppress(FileNotFoundError):
                private.unlink()
    return removed


def journaled_locks(journal: Path) -> set[Path]:
    """The lock files the journal names (held by a live holder, or left by a dead one)."""
    locks: set[Path] = set()
    if journal.is_dir():
        for entry in journal.glob("*.json"):
            with contextlib.suppress(OSError, orjson.JSONDecodeError):
                locks.add(Path(str(orjson.loads(entry.read_bytes()).get("lock"))))
    return locks


def stale_lock_hint(journal: Path | None, lock: Path) -> str:
    """What to do about ``lock`` when it stays taken: ``recover`` removes only a lock the journal
    names (applyonce's own); any other is the user's git's, and only the user can remove it."""
    if journal is not None and lock in journaled_locks(journal):
        return "if no git or applyonce process is running, run 'applyonce recover' (it removes it)"
    return f"if no git command is running, remove it with rm {lock}"


def _remove_dead_ref_lock(
    entry: Path, record: dict[str, object], ref_at: Callable[[str], str | None]
) -> list[str]:
    """Judge a :func:`journaled_ref_lock` entry if its holder is dead: remove the lock if it is
    proven the holder's (see the module docstring), then the entry."""
    removed: list[str] = []
    with _dead_holder(entry) as dead:
        if not dead:
            return removed  # alive (publishing right now), or finished meanwhile
        lock = Path(str(record.get("lock")))
        try:
            written_at = entry.stat().st_mtime
        except FileNotFoundError:
            return removed
        if _is_dead_ref_lock(lock, record, written_at, ref_at):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()
                removed.append(str(lock))
        with contextlib.suppress(FileNotFoundError):
            entry.unlink()
    return removed


def _is_dead_ref_lock(
    lock: Path, record: dict[str, object], written_at: float, ref_at: Callable[[str], str | None]
) -> bool:
    content, ref, expected = record.get("content"), record.get("ref"), record.get("expected")
    if not isinstance(content, str) or not isinstance(ref, str):
        return False
    if expected is not None and not isinstance(expected, str):
        return False
    try:
        st = os.lstat(lock)
        found = lock.read_bytes() if stat.S_ISREG(st.st_mode) else None
    except OSError:
        return False
    if found is None or not content.encode().startswith(found):
        return False
    within = REF_LOCK_FILLED_WITHIN_S if found else REF_LOCK_TAKEN_WITHIN_S
    if not written_at - 1.0 <= st.st_mtime <= written_at + within:
        return False
    return ref_at(ref) == expected


def _is_ours(lock: Path, record: dict[str, object], written_at: float | None = None) -> bool:
    """Whether ``lock`` is the one ``record`` journaled: it holds the marker or the recorded
    content. With ``written_at`` (the entry's mtime; a dead holder's entry): also a lock that
    holds a part of the marker, or nothing, and was made right after the entry, as
    :func:`held_lock` makes it. The marker is not fsynced, so a power cut can keep the lock's
    name without it; a lock of another git made once the holder was dead is younger (the rule
    of a ref lock's, :func:`_is_dead_ref_lock`)."""
    try:
        st = os.lstat(lock)
        content = lock.read_bytes() if stat.S_ISREG(st.st_mode) else None
    except OSError:
        return False
    if content is None:
        return False
    marker = record.get("marker")
    if isinstance(marker, str) and content == marker.encode():
        return True
    sha = record.get("sha256")
    if isinstance(sha, str) and hashlib.sha256(content).hexdigest() == sha:
        return True
    return (
        written_at is not None
        and isinstance(marker, str)
        and marker.encode().startswith(content)
        and written_at - 1.0 <= st.st_mtime <= written_at + REF_LOCK_TAKEN_WITHIN_S
    )


def _remove_worktree_temps(record: dict[str, object]) -> list[str]:
    """applyonce's own temp files (``atomic_write``'s names, of a dead pid) next to the files the
    holder was writing: never any other file."""
    workdir, paths = record.get("workdir"), record.get("paths")
    if not isinstance(workdir, str) or not isinstance(paths, list):
        return []
    removed = []
    for path in paths:
        if not isinstance(path, str):
            continue
        full = Path(workdir) / path
        for tmp in stale_temp_files(full.parent, glob.escape(full.name + ".")):
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
                removed.append(str(tmp))
    return removed
