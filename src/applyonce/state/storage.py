"""When applyonce's state cannot be written, say why: a full disk or a read-only file system.

SQLite reports a full disk as anything from ``database or disk is full`` to ``disk I/O error``,
and neither means the ledger is damaged: telling the user to move a healthy ledger aside would
throw away the record of every call. So a failed write is explained by its ``errno`` where there
is one, else by asking the file system (:func:`storage_cause`), and reported as a
:class:`StorageError` that names the cause and what to do.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from applyonce.errors import EXIT_CONFLICT, UsageError

# Below this much free space, an I/O error while writing is put down to a full disk.
LOW_SPACE_BYTES = 1 << 20

_FULL = {errno.ENOSPC, errno.EDQUOT}
_READ_ONLY = {errno.EROFS}
_DENIED = {errno.EACCES, errno.EPERM}


class StorageError(UsageError):
    """The state directory cannot be written: disk full, read-only, or permission denied.

    Exit 2, as for any state directory applyonce cannot use: nothing of the call took effect
    (after a publish, :class:`applyonce.flow.call.apply` says so instead).
    """

    kind = "storage"
    default_retryable = True


def storage_cause(directory: Path, exc: BaseException | None = None) -> str | None:
    """Why writing in ``directory`` failed, if it is the storage: ``"the disk is full"``,
    ``"the file system is read-only"`` or ``"permission denied"`` (None: something else)."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code in _FULL:
        return "the disk is full"
    if code in _READ_ONLY:
        return "the file system is read-only"
    if code in _DENIED:
        return "permission denied"
    existing = next((p for p in (directory, *directory.parents) if p.exists()), None)
    if existing is None:
        return None
    try:
        st = os.statvfs(existing)
    except OSError:
        return None
    if st.f_flag & os.ST_RDONLY:
        return "the file system is read-only"
    if st.f_bavail * st.f_frsize < LOW_SPACE_BYTES or (st.f_files and st.f_favail == 0):
        return "the disk is full"
    return None


def storage_error(directory: Path, cause: str, detail: str = "") -> StorageError:
    """The :class:`StorageError` for ``cause`` (from :func:`storage_cause`)."""
    hint = {
        "the disk is full": "free some space (or pass --state-dir on another disk), then repeat"
        " the call; the ledger is not damaged",
        "the file system is read-only": "pass --state-dir with a writable directory, or remount"
        " it read-write; the ledger is not damaged",
    }.get(cause, "pass --state-dir with a directory you can write")
    suffix = f" ({detail})" if detail else ""
    return StorageError(
        f"cannot write applyonce's state in {directory}: {cause}{suffix}",
        hint=hint,
        path=str(directory),
        cause=cause,
    )


class LedgerUnavailableError(StorageError):
    """The ledger's database server cannot be reached, or the connection to it was lost.

    A :class:`StorageError`: after a publish, :mod:`applyonce.flow.call.apply` reports the commit as
    landed but unrecorded (exit 5), as for any state it cannot write. Before it, exit 4 and
    retryable: nothing took effect, and a call caught in flight is settled later through Git.
    """

    kind = "ledger-unavailable"
    exit_code = EXIT_CONFLICT
    default_retryable = True
    default_hint = (
        "start the database or fix --ledger/applyonce.ledger; then repeat the call or run"
        " 'applyonce recover': Git decides whether it landed"
    )
