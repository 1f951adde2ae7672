"""Every file write applyonce makes goes through here.

``atomic_write``: temp file in the same directory → write → fsync → ``os.replace`` → fsync the
directory; the temp file is removed if anything fails before the rename. A reader therefore sees
the old file or the new one, never a torn one, and after the directory fsync the rename survives a
crash.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

TMP_PREFIX = ".applyonce-tmp-"


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink inside ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# applyonce's state (receipts, ledger, locks, temp files) is private to its user: files are made
# 0600 and directories 0700, then narrowed further by the umask, never widened.
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (``os.write`` may write less than it is given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_new(path: Path, data: bytes, *, mode: int) -> None:
    """Create ``path`` exclusively (``O_EXCL``), write ``data`` and fsync it: complete and
    durable before anything renames it into place."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def ensure_dir(path: Path, *, mode: int = PRIVATE_DIR) -> None:
    """``mkdir -p`` that makes each directory it creates durable (fsync of its parent); the
    directories it creates get ``mode`` (narrowed by the umask)."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            continue
        fsync_dir(directory.parent)


def write_temp(path: Path, data: bytes, *, mode: int = PRIVATE_FILE) -> str:
    """A new temp file beside ``path`` holding ``data`` (not fsynced yet: :func:`fsync_all`,
    then ``os.replace`` it over ``path``, as :func:`atomic_write` does for one file)."""
    tmp = f"{path.parent}/{TMP_PREFIX}{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        try:
            write_all(fd, data)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


# Files fsynced at once by fsync_all: the file system commits fsyncs that wait together in one
# journal commit, where one after another each waits for its own.
FSYNC_THREADS = 16


def fsync_all(paths: list[str]) -> None:
    """fsync each of ``paths`` (files written and closed), concurrently; returns when all are
    durable.

    Raises:
        OSError: one could not be opened or fsynced.
    """

    def one(path: str) -> None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    if len(paths) < 2:
        for path in paths:
            one(path)
        return
    # A thread each (a pool would hand a quick fsync's thread the next path, one after another),
    # at most FSYNC_THREADS at a time.
    import threading  # only where many files are written

    failed: list[BaseException] = []

    def run(path: str) -> None:
        try:
            one(path)
        except BaseException as error:  # any: a thread's own would be printed, and lost
            failed.append(error)

    for start in range(0, len(paths), FSYNC_THREADS):
        threads = [
            threading.Thread(target=run, args=(path,), name="fsync")
            for path in paths[start : start + FSYNC_THREADS]
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failed:
            raise failed[0]


def atomic_write(
    path: Path,
    data: bytes,
    *,
    mode: int = PRIVATE_FILE,
    durable: bool = True,
    sync_dir: bool = True,
    before_replace: Callable[[], None] | None = None,
) -> None:
    """Replace ``path`` with ``data`` atomically.

    Args:
        path: the destination; its directory must exist.
        data: the full new content.
        mode: permission bits of the new file, narrowed by the umask (as ``open(2)`` does).
        durable: fsync the file and the directory (receipts, ledger-adjacent state, checkout
            files, whose directories the sync fsyncs once before the index names them). False
            where a power cut may lose it at no cost (a cache; a lock journal entry's update).
        before_replace: called after the temp file is complete and before the rename (the
            ``after-receipt-tmp`` fault point hooks in here).
        sync_dir: with ``durable``, fsync the directory now; False: the caller fsyncs it once
            for many files (:func:`fsync_dir`) before anything relies on them.
    """
    tmp = path.parent / f"{TMP_PREFIX}{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    try:
        try:
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if durable and sync_dir:
        fsync_dir(path.parent)


def remove_file(path: Path, *, durable: bool = False) -> None:
    """Unlink ``path`` if it exists, then prune directories it leaves empty (never a symlink)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    if durable:
        fsync_dir(path.parent)


def prune_empty_dirs(start: Path, stop: Path) -> None:
    """Remove empty directories from ``start`` up to (not including) ``stop``."""
    current = start
    while current != stop and stop in current.parents:
        try:
            os.rmdir(current)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT, errno.ENOTDIR):
                return
            raise
        current = current.parent


def is_real_dir_chain(root: Path, relative: str) -> bool:
    """True when every existing parent of ``root/relative`` is a real directory, not a symlink."""
    return blocking_parent(root, relative) is None


def blocking_parent(root: Path, relative: str) -> str | None:
    """The first parent of ``root/relative`` (relative to ``root``) that exists and is not a real
    directory (a file, a symlink, …); None when there is none."""
    current = root
    parts = relative.split("/")[:-1]
    for depth, part in enumerate(parts, 1):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return "/".join(parts[:depth])
    return None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_temp_files(directory: Path, name: str = "") -> Iterator[Path]:
    """Temp files left in ``directory`` (for the file ``name``, if given) by dead writers."""
    if not directory.is_dir():
        return
    for tmp in directory.glob(f"{TMP_PREFIX}{name}*"):
        parts = tmp.name.rsplit(".", 2)
        pid = int(parts[-2]) if len(parts) == 3 and parts[-2].isdigit() else None
        if pid is None or not pid_alive(pid):
            yield tmp
