"""The receipts directory: ``<state>/receipts/<call_id>.json``, one file per call.

Written atomically (:func:`applyonce.state.files.atomic_write`); every read is verified
(:func:`applyonce.core.receipt.parse_receipt`). Only applyonce writes here.

With a shared ledger (PostgreSQL), the receipts live in it too (a :class:`ReceiptMirror`) and the
files become a cache, so every clone sees every clone's calls: a write goes to the mirror, then to
the file (fsynced, as always), so that no receipt is in one clone's cache alone (a ``prepared``
receipt whose claim a crash of the database lost would be a call in flight that only that clone's
``recover`` finds, after another clone's said every call was settled); a read takes the file, else
the mirror's copy (written back into the cache); and where the file's digest is not the one the
call's ledger row names but the mirror's is, the mirror's copy wins (another clone ran the call
again). A copy that matches neither is still reported as tampered with.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from applyonce.core.identity import is_sha256_hex
from applyonce.core.receipt import Receipt, ReceiptError, parse_receipt
from applyonce.errors import ApplyOnceError
from applyonce.state.files import (
    atomic_write,
    ensure_dir,
    fsync_all,
    fsync_dir,
    stale_temp_files,
    write_temp,
)
from applyonce.state.storage import storage_cause, storage_error


@runtime_checkable
class ReceiptMirror(Protocol):
    """Where receipts are kept besides the files: a ledger that many clones share."""

    def put_receipt(self, call_id: str, sha256: str, body: bytes) -> None:
        """Store ``body`` (whose digest is ``sha256``) as the receipt of ``call_id``, durably."""
        ...

    def get_receipt(self, call_id: str) -> bytes | None:
        """The stored receipt of ``call_id`` (None: none); untrusted, verified by the reader."""
        ...

    def receipt_ids(self) -> list[str]:
        """The calls with a stored receipt."""
        ...


# A mirror, or what gives one when first needed (a ledger is opened by its first use).
MirrorSource = ReceiptMirror | Callable[[], object] | None


class ReceiptStore:
    """The receipts directory (and its :class:`ReceiptMirror`, if any). Only applyonce writes
    here."""

    def __init__(
        self, state_dir: Path, *, batched: bool = False, mirror: MirrorSource = None
    ) -> None:
        self.dir = state_dir / "receipts"
        # Batched: a write leaves its temp file and waits for sync(), which fsyncs the temp
        # files of the batch at once (concurrently: the file system commits them together),
        # renames each into place, then fsyncs the directory once (before any record names
        # them). Until then the batch reads its own writes from here.
        self.batched = batched
        self._unsynced = False
        self._waiting: dict[str, tuple[str, bytes, str, Callable[[], None] | None]] = {}
        self._mirror_source = mirror
        self._mirror: ReceiptMirror | None = None

    @property
    def mirror(self) -> ReceiptMirror | None:
        """The mirror (None: the files are all there is)."""
        if self._mirror is None and self._mirror_source is not None:
            source = self._mirror_source
            found = source() if not isinstance(source, ReceiptMirror) else source
            self._mirror = found if isinstance(found, ReceiptMirror) else None
            self._mirror_source = None
        return self._mirror

    def batch(self) -> ReceiptStore:
        """A store over the same directory whose writes share one directory fsync
        (:meth:`sync`): for settling many calls at once (``applyonce recover``)."""
        return ReceiptStore(
            self.dir.parent, batched=True, mirror=self._mirror or self._mirror_source
        )

    def sync(self) -> None:
        """Put a batched store's writes in place, durably: the mirror first, then the temp
        files' data fsynced (all at once), each renamed over its receipt, the directory fsynced
        once."""
        waiting, self._waiting = self._waiting, {}
        if waiting:
            try:
                if self.mirror is not None:
                    # The ledger's copies first, as write() puts them.
                    for call_id, (_, data, sha, _) in waiting.items():
                        self.mirror.put_receipt(call_id, sha, data)
                fsync_all([tmp for tmp, _, _, _ in waiting.values()])
                for call_id, (tmp, _, _, before_replace) in waiting.items():
                    if before_replace is not None:
                        before_replace()
                    os.replace(tmp, f"{self.dir}/{call_id}.json")
            except BaseException:
                for tmp, _, _, _ in waiting.values():
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                raise
            self._unsynced = True
        if self._unsynced:
            fsync_dir(self.dir)
            self._unsynced = False

    def path(self, call_id: str) -> Path:
        if not is_sha256_hex(call_id):
            raise ReceiptError(f"{call_id[:80]!r} is not a call ID (64 lowercase hex digits)")
        return self.dir / f"{call_id}.json"

    def write(self, receipt: Receipt, *, before_replace: Callable[[], None] | None = None) -> str:
        """Write ``receipt`` atomically. Returns the sha256 of the bytes written.

        Raises:
            StorageError: the disk is full or the file system read-only (nothing was replaced).
        """
        data = receipt.to_json()
        path = self.path(receipt.call_id)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            # Put there by hand: replacing it would fail halfway (a directory) or write elsewhere.
            raise ReceiptError(
                f"receipt {receipt.call_id[:12]} cannot be written: {path.name} is not a regular"
                " file",
                call_id=receipt.call_id,
                hint=f"move {path} aside, then run 'applyonce recover'",
            )
        sha = hashlib.sha256(data).hexdigest()
        if self.mirror is not None and not self.batched:
            # The ledger's copy first: a receipt in this clone's cache alone (the database lost
            # before it took it) is a call only this clone's recover would see.
            self.mirror.put_receipt(receipt.call_id, sha, data)
        try:
            ensure_dir(self.dir)
            if self.batched:
                tmp = write_temp(path, data)
                earlier = self._waiting.pop(receipt.call_id, None)
                if earlier is not None:
                    os.unlink(earlier[0])  # written again in the batch: the last one stands
                self._waiting[receipt.call_id] = (tmp, data, sha, before_replace)
                return sha
            atomic_write(path, data, before_replace=before_replace)
        except OSError as exc:
            cause = storage_cause(self.dir, exc)
            if cause is None:
                raise
            raise storage_error(self.dir, cause, exc.strerror or "") from None
        return sha

    def remove_stale_temps(self, call_id: str) -> None:
        """Remove the temp files a killed earlier execution of ``call_id`` left (it lists the
        directory: called when a call is taken over, never on a call's ordinary path)."""
        for tmp in stale_temp_files(self.dir, f"{self.path(call_id).name}"):
            tmp.unlink(missing_ok=True)

    def sha256_of(self, call_id: str) -> str | None:
        """The SHA-256 of the receipt file's bytes, read as :meth:`read_bytes` reads them (no
        symlink followed, a regular file only), for a pass over every receipt; None where
        there is no such file or it cannot be read (:meth:`read_bytes` then says why)."""
        if not is_sha256_hex(call_id):
            return None
        if call_id in self._waiting:
            return self._waiting[call_id][2]
        try:
            fd = os.open(
                f"{self.dir}/{call_id}.json",
                os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
            )
        except OSError:
            return None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return None
            h = hashlib.sha256()
            while chunk := os.read(fd, max(info.st_size, 1) + 1):
                h.update(chunk)
            return h.hexdigest()
        except OSError:
            return None
        finally:
            os.close(fd)

    def read_bytes(self, call_id: str) -> bytes | None:
        """The receipt's bytes: the file's, else the mirror's copy (None: there is none).

        Raises:
            ReceiptError: it is not a regular file (a directory, a symlink, a device or a FIFO,
                which would never end) or cannot be read. applyonce writes only regular files
                here; anything else was put there by hand.
        """
        if not is_sha256_hex(call_id):
            self.path(call_id)  # raises
        if call_id in self._waiting:
            return self._waiting[call_id][1]  # written in this batch, not in place yet
        # A string, not a Path: a pass over ten thousand receipts makes no Path of each.
        name = f"{self.dir}/{call_id}.json"

        def unreadable(why: str | None) -> ReceiptError:
            return ReceiptError(
                f"receipt {call_id[:12]} is unreadable ({why})",
                call_id=call_id,
                hint=f"move {name} aside, then run 'applyonce recover' to rebuild it",
            )

        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return self._from_mirror(call_id)
        except OSError as exc:
            raise unreadable("a symlink" if os.path.islink(name) else exc.strerror) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise unreadable("not a regular file")
            chunks: list[bytes] = []
            while chunk := os.read(fd, info.st_size + 1):
                chunks.append(chunk)
            return b"".join(chunks)
        except OSError as exc:
            raise unreadable(exc.strerror) from None
        finally:
            os.close(fd)

    def load(self, call_id: str, *, expected_sha256: str | None = None) -> Receipt | None:
        """Read and verify the receipt of ``call_id`` (None if there is none).

        Raises:
            ReceiptError: unreadable, or disagrees with itself or with ``expected_sha256``.
        """
        data = self.read_bytes(call_id)
        if data is None:
            return None
        if (
            expected_sha256 is not None
            and self.mirror is not None
            and hashlib.sha256(data).hexdigest() != expected_sha256
        ):
            # The cached file is not the receipt the ledger names: another clone may have
            # settled the call since. Its copy wins if (and only if) it is the one named.
            stored = self.mirror.get_receipt(call_id)
            if stored is not None and hashlib.sha256(stored).hexdigest() == expected_sha256:
                self._cache(call_id, stored)
                data = stored
        return parse_receipt(data, call_id=call_id, expected_sha256=expected_sha256)

    def _from_mirror(self, call_id: str) -> bytes | None:
        if self.mirror is None:
            return None
        stored = self.mirror.get_receipt(call_id)
        if stored is not None:
            self._cache(call_id, stored)
        return stored

    def _cache(self, call_id: str, data: bytes) -> None:
        """Keep the mirror's copy as the file, where this clone keeps receipts already (reading
        a clone with no state creates none); a cache that cannot be written is no error."""
        if not self.dir.is_dir():
            return
        with contextlib.suppress(OSError, ApplyOnceError):
            atomic_write(self.path(call_id), data, durable=False, sync_dir=False)

    def call_ids(self) -> list[str]:
        """Every call with a receipt (the files', and the mirror's)."""
        found = set()
        if self.dir.is_dir():
            # Names, not Paths: a pass over ten thousand receipts makes no Path of each.
            found = {
                name[:-5]
                for name in os.listdir(self.dir)
                if name.endswith(".json") and is_sha256_hex(name[:-5])
            }
        if self.mirror is not None:
            found.update(c for c in self.mirror.receipt_ids() if is_sha256_hex(c))
        found.update(self._waiting)
        return sorted(found)
