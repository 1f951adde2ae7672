"""A call's objects reach the disk as one pack: two files and three fsyncs, however many objects.

Written as loose objects, every blob, tree and commit of a call costs a file, its fsync and an
fsync of its fan-out directory. :func:`write_pack` writes them instead as one pack and its index,
as git's own ``index-pack`` does: each file complete in a temp file of ``objects/pack`` and
fsynced, then renamed into place (the index last: git and libgit2 see a pack by its ``.idx``),
then one fsync of the directory. A crash leaves either no new pack or a whole one, never a pack
that names missing bytes; a left-over temp file is removed by ``applyonce recover``.

**Kept until published.** A call's objects are unreachable until its publish moves the branch,
and ``git repack -a -d`` (``git gc``, ``git maintenance``) deletes every pack it listed once it
has repacked what the refs reach: a repack that lists the call's pack, then reads the refs just
before the publish, deletes the pack of a commit the branch now names. So a call's pack is made
with a ``.keep`` file beside it, as ``git receive-pack`` keeps a pushed pack until its refs are
updated: the ``.keep`` exists before the pack does (git lists packs by their ``.pack``), and git
neither lists a kept pack among those to delete nor repacks its objects elsewhere. The ``.keep``
is journaled first (:func:`applyonce.state.lockjournal.take_keep`) and removed once the branch
reaches the objects, or the staging is abandoned; ``applyonce recover`` removes one a killed
call left.

**Merged, ours only.** Small packs are merged (:func:`merge_small_packs`) so that their number
stays bounded: every lookup of an object a repository lacks probes every pack (a thousand packs
made such lookups sixty times slower than one), and ``git gc --auto`` would otherwise repack the
whole repository once 50 have piled up. Only packs applyonce wrote are merged: each is recorded
in the registry (``<state>/packs/pack-<sum>``, made before the pack appears), and is taken only
if its trailer is the checksum its name says — bytes applyonce wrote, whole objects and no
deltas. git's own packs (deltified, maybe large) are never read, rewritten or removed here.
Packs are merged by tiers of size, as a log-structured store merges its runs: :data:`MERGE_AT`
packs of one tier become one pack of the next, so after ``n`` calls there are at most
``(MERGE_AT - 1)`` packs a tier and ``log(n)`` tiers. A merge copies each entry's bytes as they
are, streaming (no object is inflated, none held in memory), writes the new pack durably before
it removes the ones it replaces, so every object is on disk at every moment.

Objects are stored whole (no deltas): ``git gc`` deltifies them later, as it does a push's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import struct
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from applyonce.state.files import TMP_PREFIX, ensure_dir, fsync_dir, write_all, write_new
from applyonce.state.lockjournal import HeldKeep, LockTakenError, take_keep
from applyonce.state.locks import try_file_lock

# Where, under the state directory, the packs applyonce wrote are recorded (one empty file each).
REGISTRY_DIR = "packs"
_MERGE_LOCK = "merge.lock"  # in the registry: one merger at a time
# A registry entry whose pack is gone (merged, or repacked by git) is removed once it is this old:
# a younger one may be a writer's that has not renamed its pack into place yet.
STALE_ENTRY_S = 60.0
# A merge writes at most this much: packs from SMALL_PACK_BYTES / MERGE_AT up are git's business
# (git gc), never merged here, so no call copies more than this for the others.
SMALL_PACK_BYTES = 64 << 20
# A tier holds packs of TIER_BASE * MERGE_AT**k bytes up to the next power; MERGE_AT of one tier
# are merged into one.
TIER_BASE = 16 << 10
MERGE_AT = 8
_LARGE_OFFSET = 0x80000000
_ZLIB_LEVEL = 1  # speed over size: git gc recompresses
_COPY_CHUNK = 1 << 20
_WHOLE_TYPES = (1, 2, 3, 4)  # commit, tree, blob, tag: never a delta


@dataclass(frozen=True)
class WrittenPack:
    """A pack :func:`write_pack` put in place: its name (``pack-<sum>``) and its ``.keep``
    (None: written without one)."""

    name: str
    keep: HeldKeep | None


def _entry_header(kind: int, size: int) -> bytes:
    """A pack entry's header: the type and the inflated size, 4 bits then 7 bits a byte."""
    byte = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


def _entries(objects: Sequence[tuple[bytes, int, bytes]]) -> list[tuple[bytes, bytes]]:
    """Each object's (raw id, pack entry bytes)."""
    return [
        (raw_id, _entry_header(kind, len(data)) + zlib.compress(data, _ZLIB_LEVEL))
        for raw_id, kind, data in objects
    ]


def _pack_bytes(
    entries: Sequence[tuple[bytes, bytes]],
) -> tuple[bytes, list[tuple[bytes, int, int]]]:
    """The pack of ``entries`` ((raw id, entry bytes), in order) and each entry's (raw id, crc32,
    offset)."""
    parts = [b"PACK", struct.pack(">II", 2, len(entries))]
    offset = 12
    index = []
    for raw_id, entry in entries:
        index.append((raw_id, zlib.crc32(entry) & 0xFFFFFFFF, offset))
        parts.append(entry)
        offset += len(entry)
    body = b"".join(parts)
    return body + hashlib.sha1(body).digest(), index


def _index_bytes(entries: list[tuple[bytes, int, int]], pack_sum: bytes) -> bytes:
    """The version 2 index of a pack: fan-out, sorted IDs, CRCs, offsets, checksums."""
    entries = sorted(entries)
    fanout = [0] * 256
    for raw_id, _, _ in entries:
        fanout[raw_id[0]] += 1
    total = 0
    for i in range(256):
        total += fanout[i]
        fanout[i] = total
    small: list[int] = []
    large: list[int] = []
    for _, _, offset in entries:
        if offset < _LARGE_OFFSET:
            small.append(offset)
        else:
            small.append(_LARGE_OFFSET | len(large))
            large.append(offset)
    body = b"".join(
        [
            b"\xfftOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            *(raw_id for raw_id, _, _ in entries),
            struct.pack(f">{len(entries)}I", *(crc for _, crc, _ in entries)),
            struct.pack(f">{len(small)}I", *small),
            struct.pack(f">{len(large)}Q", *large),
            pack_sum,
        ]
    )
    return body + hashlib.sha1(body).digest()


def _taken(pack_dir: Path, name: str) -> bool:
    """Whether a pack of that name is there, or being put there (its ``.keep`` made first)."""
    return any(os.path.lexists(pack_dir / f"{name}.{ext}") for ext in ("keep", "pack", "idx"))


def write_pack(
    objects_dir: Path,
    objects: Iterable[tuple[str, int, bytes]],
    *,
    kept: bool = False,
    journal: Path | None = None,
    registry: Path | None = None,
) -> WrittenPack | None:
    """Write ``objects`` ((hex ID, git type, data)) as one pack in ``objects_dir/pack``, durably.

    Args:
        kept: make the pack's ``.keep`` before the pack appears (see the module docstring),
            journaled in ``journal`` (None: not journaled); the caller releases it.
        registry: where the pack is recorded as applyonce's own, before it appears (None: not
            recorded, never merged here).

    Returns:
        The pack put in place, or None when there was nothing to write.

    Raises:
        OSError: the pack could not be written (nothing of it is left in place).
    """
    unique = {oid: (kind, data) for oid, kind, data in objects}
    if not unique:
        return None
    ordered = _entries(sorted((bytes.fromhex(o), kind, data) for o, (kind, data) in unique.items()))
    pack_dir = objects_dir / "pack"
    keep: HeldKeep | None = None
    # The name is the checksum of the bytes: the same objects in the same order make the same
    # pack. A kept pack must be this writer's alone (another's keep ends with its call), so where
    # the name is taken the entries are written in another order, which names another pack.
    for turn in range(len(ordered)):
        pack, index_entries = _pack_bytes(ordered[turn:] + ordered[:turn])
        name = f"pack-{pack[-20:].hex()}"
        if not kept:
            if (pack_dir / f"{name}.idx").exists():
                # The same objects, put there by another writer: its rename may not be durable yet.
                fsync_dir(pack_dir)
                return WrittenPack(name, None)
            break
        if _taken(pack_dir, name):
            continue
        _register(registry, name)
        try:
            keep = take_keep(journal, pack_dir / f"{name}.keep")
        except LockTakenError:
            continue
        break
    else:
        # Not one order names a free pack (one object, already kept by another writer): its
        # objects are also this writer's, and the branch that will reach them is not moved yet.
        return WrittenPack(name, None)
    if not kept:
        _register(registry, name)
    index = _index_bytes(index_entries, pack[-20:])
    try:
        _put_in_place(pack_dir, name, pack, index)
    except BaseException:
        if keep is not None:
            keep.release()
        raise
    return WrittenPack(name, keep)


def _put_in_place(pack_dir: Path, name: str, pack: bytes, index: bytes) -> None:
    """The pack and its index, each complete and fsynced, renamed into place (the index last),
    then the directory fsynced. On failure, nothing of them is left."""
    tmp_pack, tmp_index = _temp_names(pack_dir)
    placed = False
    try:
        write_new(tmp_pack, pack, mode=0o444)
        write_new(tmp_index, index, mode=0o444)
        os.replace(tmp_pack, pack_dir / f"{name}.pack")
        placed = True
        os.replace(tmp_index, pack_dir / f"{name}.idx")
    except BaseException:
        if placed:  # a pack without its index: git would list it, never read it
            with contextlib.suppress(FileNotFoundError):
                os.unlink(pack_dir / f"{name}.pack")
        raise
    finally:
        for tmp in (tmp_pack, tmp_index):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    fsync_dir(pack_dir)


def _temp_names(pack_dir: Path) -> tuple[Path, Path]:
    """Temp files for a pack and its index. Not git's ``tmp_*``: ``git prune --expire=now``
    (``git gc --prune=now``) deletes those however young, under a writer's feet. These are the
    state helpers' names (``.applyonce-tmp-<name>.<pid>.<token>``): ``recover`` removes a dead
    writer's (:func:`applyonce.state.files.stale_temp_files`)."""
    token = f"{os.getpid()}.{secrets.token_hex(4)}"
    return pack_dir / f"{TMP_PREFIX}pack.{token}", pack_dir / f"{TMP_PREFIX}idx.{token}"


def _register(registry: Path | None, name: str) -> None:
    """Record ``name`` as a pack applyonce wrote (not made durable: a pack whose record is lost
    is only never merged here, and left to git gc)."""
    if registry is None:
        return
    ensure_dir(registry)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(registry / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))


def pack_ids(index_path: Path) -> list[str]:
    """The hex IDs of the objects a version 2 pack index names."""
    return [raw_id.hex() for raw_id, _, _ in _read_index(index_path.read_bytes(), index_path)]


def _read_index(data: bytes, index_path: Path) -> list[tuple[bytes, int, int]]:
    """Each object's (raw id, crc32, offset) of a version 2 pack index."""
    if data[:8] != b"\xfftOc\x00\x00\x00\x02":
        raise ValueError(f"{index_path.name} is not a version 2 pack index")
    count = struct.unpack_from(">I", data, 8 + 255 * 4)[0]
    ids_at = 8 + 256 * 4
    crcs_at = ids_at + 20 * count
    offsets_at = crcs_at + 4 * count
    large_at = offsets_at + 4 * count
    crcs = struct.unpack_from(f">{count}I", data, crcs_at)
    offsets = []
    for small in struct.unpack_from(f">{count}I", data, offsets_at):
        if small & _LARGE_OFFSET:
            small = struct.unpack_from(">Q", data, large_at + 8 * (small & ~_LARGE_OFFSET))[0]
        offsets.append(small)
    return [
        (data[ids_at + 20 * i : ids_at + 20 * (i + 1)], crcs[i], offsets[i]) for i in range(count)
    ]


def own_packs(objects_dir: Path, registry: Path) -> dict[Path, int]:
    """The packs applyonce wrote that may be merged now: recorded in ``registry``, whole (an
    index beside), not kept (a call in flight), not a partial clone's, a cruft pack or a
    bitmapped one, small, and whose trailer is the checksum their name says. Their sizes by
    ``.pack`` path. Records of packs that are gone are removed."""
    found: dict[Path, int] = {}
    pack_dir = objects_dir / "pack"
    with contextlib.suppress(FileNotFoundError), os.scandir(registry) as it:
        recorded = [entry for entry in it if entry.name.startswith("pack-")]
    for entry in recorded:
        name = entry.name
        if not all(c in "0123456789abcdef" for c in name[len("pack-") :]) or len(name) != 45:
            continue
        pack = pack_dir / f"{name}.pack"
        try:
            size = pack.stat().st_size
        except FileNotFoundError:
            _forget_if_gone(pack_dir, Path(entry.path))
            continue
        if size >= SMALL_PACK_BYTES // MERGE_AT or not (pack_dir / f"{name}.idx").exists():
            continue
        if any(os.path.lexists(pack_dir / f"{name}.{ext}") for ext in _LEFT_TO_GIT):
            continue  # in flight, a partial clone's, a cruft pack or a bitmapped one: not ours now
        if _trailer(pack) == name[len("pack-") :]:
            found[pack] = size
    return found


_LEFT_TO_GIT = ("keep", "promisor", "mtimes", "bitmap")


def _forget_if_gone(pack_dir: Path, record: Path) -> None:
    name = record.name
    if _taken(pack_dir, name):
        return
    with contextlib.suppress(OSError):
        if time.time() - record.stat().st_mtime > STALE_ENTRY_S:
            record.unlink()


def _trailer(pack: Path) -> str | None:
    try:
        with open(pack, "rb") as f:
            f.seek(-20, os.SEEK_END)
            return f.read(20).hex()
    except OSError:
        return None


def _tier(size: int) -> int:
    tier, bound = 0, TIER_BASE
    while size >= bound:
        tier, bound = tier + 1, bound * MERGE_AT
    return tier


def merge_small_packs(objects_dir: Path, registry: Path) -> int:
    """Merge applyonce's own packs (:func:`own_packs`) of each tier that holds :data:`MERGE_AT`
    of them into one, streaming. The merged pack is durable before any pack it replaces is
    removed. Returns how many packs were merged (0: no tier is full, or another process is
    merging)."""
    if any((objects_dir / "pack").glob("multi-pack-index*")):
        # A multi-pack-index (git maintenance, scalar, repack --write-midx) names its packs:
        # removing one would break it. Such a repository's packs are git maintenance's business.
        return 0
    if not registry.is_dir():
        return 0
    merged_count = 0
    with try_file_lock(registry / _MERGE_LOCK) as mine:
        if not mine:
            return 0
        tiers: dict[int, list[Path]] = {}
        for pack, size in own_packs(objects_dir, registry).items():
            tiers.setdefault(_tier(size), []).append(pack)
        for tier in sorted(tiers):
            packs = sorted(tiers[tier])
            if len(packs) < MERGE_AT:
                continue
            try:
                merged = _merge(objects_dir / "pack", packs, registry)
            except (OSError, ValueError):
                return merged_count  # removed meanwhile (git repacked them): nothing is lost
            for pack in packs:
                if pack.stem == merged or os.path.lexists(pack.with_suffix(".keep")):
                    continue
                for suffix in (".idx", ".rev", ".pack"):  # the index first: then the pack is unseen
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(pack.with_suffix(suffix))
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(registry / pack.stem)
            fsync_dir(objects_dir / "pack")
            merged_count += len(packs)
    return merged_count


def _merge(pack_dir: Path, packs: Sequence[Path], registry: Path) -> str:
    """Write one pack holding every object of ``packs`` (each once), their entries copied byte
    for byte; returns its name. Only whole objects are copied: a delta's offsets would not hold.

    Raises:
        OSError: a pack could not be read or the new one written (nothing is left in place).
        ValueError: a pack is not one applyonce wrote.
    """
    plan: list[tuple[Path, list[tuple[bytes, int, int, int]]]] = []  # (pack, [(id, crc, at, len)])
    seen: set[bytes] = set()
    for pack in packs:
        listed = sorted(
            _read_index(pack.with_suffix(".idx").read_bytes(), pack.with_suffix(".idx")),
            key=lambda item: item[2],
        )
        end = pack.stat().st_size - 20
        entries = []
        for i, (raw_id, crc, offset) in enumerate(listed):
            length = (listed[i + 1][2] if i + 1 < len(listed) else end) - offset
            if raw_id not in seen:
                seen.add(raw_id)
                entries.append((raw_id, crc, offset, length))
        plan.append((pack, entries))
    tmp_pack, tmp_index = _temp_names(pack_dir)
    try:
        digest = hashlib.sha1()
        index_entries: list[tuple[bytes, int, int]] = []
        fd = os.open(tmp_pack, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            header = b"PACK" + struct.pack(">II", 2, len(seen))
            digest.update(header)
            write_all(fd, header)
            offset = len(header)
            for pack, entries in plan:
                with open(pack, "rb") as source:
                    for raw_id, crc, at, length in entries:
                        source.seek(at)
                        for chunk in _copy(source, length, first=True):
                            digest.update(chunk)
                            write_all(fd, chunk)
                        index_entries.append((raw_id, crc, offset))
                        offset += length
            pack_sum = digest.digest()
            write_all(fd, pack_sum)
            os.fsync(fd)
        finally:
            os.close(fd)
        name = f"pack-{pack_sum.hex()}"
        write_new(tmp_index, _index_bytes(index_entries, pack_sum), mode=0o444)
        _register(registry, name)
        os.replace(tmp_pack, pack_dir / f"{name}.pack")
        os.replace(tmp_index, pack_dir / f"{name}.idx")
    finally:
        for tmp in (tmp_pack, tmp_index):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    fsync_dir(pack_dir)
    return name


def _copy(source: BinaryIO, length: int, *, first: bool) -> Iterator[bytes]:
    """``length`` bytes of ``source`` in chunks; the first byte must begin a whole object."""
    remaining = length
    while remaining:
        chunk = source.read(min(remaining, _COPY_CHUNK))
        if not chunk:
            raise ValueError("a pack ended early")
        if first and (chunk[0] >> 4) & 7 not in _WHOLE_TYPES:
            raise ValueError("a pack holds a delta: not one applyonce wrote")
        first = False
        remaining -= len(chunk)
        yield chunk
