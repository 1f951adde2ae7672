"""A batched receipt store (``applyonce recover``): writes wait for ``sync``, which fsyncs their
data at once, renames them into place and fsyncs the folder; until then the batch reads its own
writes, and nothing else sees them."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import Receipt
from applyonce.state.files import FSYNC_THREADS, TMP_PREFIX, fsync_all
from applyonce.state.receipts import ReceiptStore


def receipt(i: int, status: str = "rejected") -> Receipt:
    ident = CallIdentity.compute(f"{i:064x}")
    return Receipt.of_call(ident, status=status, execution_id="e" * 32, ref="refs/heads/main")


def test_a_batch_reads_its_own_writes_and_puts_them_in_place_at_sync(tmp_path: Path) -> None:
    plain = ReceiptStore(tmp_path)
    batch = plain.batch()
    written = [receipt(i) for i in range(3)]
    shas = [batch.write(r) for r in written]
    again = receipt(0, "unknown")
    shas[0] = batch.write(again)  # written twice in the batch: the last one stands
    ids = [r.call_id for r in written]
    # Not in place yet: only the batch sees them (one temp file each).
    assert [plain.read_bytes(c) for c in ids] == [None] * 3
    assert sorted(batch.call_ids()) == sorted(ids)
    assert batch.load(ids[0]) == again and [batch.sha256_of(c) for c in ids] == shas
    temps = [n for n in os.listdir(tmp_path / "receipts") if n.startswith(TMP_PREFIX)]
    assert len(temps) == 3, temps
    batch.sync()
    assert sorted(os.listdir(tmp_path / "receipts")) == sorted(f"{c}.json" for c in ids)
    assert [plain.sha256_of(c) for c in ids] == shas
    assert plain.load(ids[0], expected_sha256=shas[0]) == again


def test_a_sync_that_fails_leaves_no_temp_file_and_no_receipt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = ReceiptStore(tmp_path).batch()
    ids = [receipt(i).call_id for i in range(2)]
    for i in range(2):
        batch.write(receipt(i))

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError):
        batch.sync()
    assert os.listdir(tmp_path / "receipts") == []
    assert [ReceiptStore(tmp_path).read_bytes(c) for c in ids] == [None, None]


def test_a_batchs_fsyncs_wait_together_sixteen_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file system commits fsyncs that wait together in one journal commit: the first
    FSYNC_THREADS of a batch are all in flight at once (a barrier that breaks otherwise), and
    every file of the batch is fsynced."""
    paths = []
    for i in range(FSYNC_THREADS + 4):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"x")
        paths.append(str(path))
    together = threading.Barrier(FSYNC_THREADS, timeout=10)
    synced: list[int] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        if len(synced) < FSYNC_THREADS:
            together.wait()
        synced.append(os.fstat(fd).st_ino)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    fsync_all(paths)
    assert sorted(synced) == sorted(os.stat(p).st_ino for p in paths)


def test_a_batchs_fsync_that_fails_with_any_error_is_the_error_of_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsync in its own thread that raises something other than OSError is not lost (the
    thread's would only be printed): fsync_all never returns as if every file were durable."""
    paths = []
    for i in range(4):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"x")
        paths.append(str(path))
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}") == paths[2]:
            raise MemoryError
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(MemoryError):
        fsync_all(paths)
