"""Every lock applyonce takes or judges, in one place.

* :func:`file_lock` — an exclusive ``flock`` on a lock file, held for a block (the ledger's first
  open, the checkout sync), waited for a few seconds at most; :func:`try_file_lock` takes it only
  if it is free (a scratch slot); :func:`lock_is_held` asks without taking it.
* Stale-lock probing for ``applyonce recover``: a Git lock file (``index.lock``, a ref's
  ``.lock``) that no live process holds open, and that is old enough not to belong to a writer in
  another PID namespace that has only just made it, is debris of a killed writer
  (:func:`stale_locks`; used for applyonce's own scratch checkouts only). In the user's repository
  such a lock is only reported (:func:`foreign_lock_notes`): applyonce removes there only the
  locks its journal proves it made (:mod:`applyonce.state.lockjournal`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path

from applyonce.errors import ConflictError

# A lock file younger than this may belong to a writer we cannot see; it is given time to age.
LOCK_MIN_AGE_S = 2.0
# The longest applyonce waits for one of its own lock files (the sync lock, a database's first
# open): every wait of applyonce is bounded (docs/design.md §11).
LOCK_WAIT_S = 5.0


class LockBusyError(ConflictError):
    """A lock file of applyonce stayed held by another process for the whole bounded wait."""

    kind = "lock-busy"
    default_retryable = True


@contextlib.contextmanager
def file_lock(path: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the block.

    The wait is bounded: a holder that hangs (stopped, or stuck on a dead network disk) must not
    hang every applyonce after it. The lock is polled for ``wait`` seconds (default
    :data:`LOCK_WAIT_S`), then given up.

    Raises:
        LockBusyError: another process held it for the whole wait (exit 4, retryable).
    """
    wait = LOCK_WAIT_S if wait is None else wait
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + wait
        pause = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = flock_holder(path)
                    by = f" by process {holder}" if holder else ""
                    raise LockBusyError(
                        f"{path} is held{by} for more than {wait:g} s",
                        hint="if that process is stuck, stop it (the lock is freed when it "
                        "exits); otherwise retry in a moment",
                        path=str(path),
                        pid=holder,
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.1)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def flock_holder(path: Path) -> int | None:
    """The pid holding a ``flock`` on ``path``, as ``/proc/locks`` shows it (None: unknown)."""
    try:
        st = path.stat()
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; "->" marks a waiter, not a holder.
        if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == want:
            return int(fields[4]) if fields[4].isdigit() and int(fields[4]) > 0 else None
    return None


@contextlib.contextmanager
def try_file_lock(path: Path) -> Iterator[bool]:
    """Take the ``flock`` on ``path`` if nobody holds it; yields whether it was taken."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def lock_is_held(path: Path) -> bool:
    """Whether some process holds the ``flock`` on ``path`` (False if there is no such file)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _age_left(path: Path) -> float:
    """Seconds until ``path`` is old enough to be judged stale (0 if it already is, or is gone).

    Never more than :data:`LOCK_MIN_AGE_S`: a lock dated in the future (the clock was stepped
    back) would otherwise make the caller sleep for the whole difference."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0
    return min(LOCK_MIN_AGE_S, max(0.0, LOCK_MIN_AGE_S - age))


def describe_age(path: Path) -> str | None:
    """How old ``path`` is, for a person ("3 min old", "dated 2 h in the future"); None if gone."""
    try:
        age = time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return None
    if age < -1.0:
        return f"dated {_duration(-age)} in the future (was the clock set back?)"
    return f"{_duration(max(age, 0.0))} old"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size - 1:  # 3599.9 s is "1 h", not "60 min"
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def foreign_lock_notes(candidates: set[Path]) -> list[str]:
    """One line for each lock file among ``candidates`` that no live process holds open.

    These are not applyonce's (its own are journaled, see :mod:`applyonce.state.lockjournal`):
    the user's git waiting for an editor, or a git or libgit2 writer that was killed. They are
    never removed, only reported with what to do."""
    notes = []
    for lock in sorted(candidates - open_by_any_process(candidates)):
        age = describe_age(lock)
        if age is not None:
            notes.append(
                f"Git lock file {lock} is {age}; if no git command is running, "
                f"remove it with rm {lock}"
            )
    return notes


def open_by_any_process(paths: set[Path]) -> set[Path]:
    """Which of ``paths`` some live process has open (Linux ``/proc``; elsewhere: all of them)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return set(paths)
    wanted = {str(p) for p in paths}
    held: set[Path] = set()
    for fd_dir in proc.glob("[0-9]*/fd"):
        with contextlib.suppress(OSError):
            for fd in fd_dir.iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target in wanted:
                        held.add(Path(target))
    return held


def stale_locks(candidates: set[Path]) -> list[Path]:
    """The lock files among ``candidates`` that no live process holds open, sorted.

    A lock nobody holds open is stale, but one only just made might belong to a writer we cannot
    see (another PID namespace): the young ones are let age, then looked at again.
    """
    unheld = candidates - open_by_any_process(candidates)
    if not unheld:
        return []
    youngest = max(_age_left(p) for p in unheld)
    if youngest > 0:
        time.sleep(youngest)
        unheld -= open_by_any_process(unheld)
    return sorted(unheld)
