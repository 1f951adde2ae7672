"""A call's objects reach the disk as one pack: two files and three fsyncs, however many objects.

Written as loose objects, every blob, tree and commit of a call costs a file, its fsync and an
fsync of its fan-out directory. :func:`write_pack` writes them instead as one pack and its index,
as git's own ``index-pack`` does: each file complete in a temp file of ``objects/pack`` and
fsynced, then renamed into place (the index last: git and libgit2 see a pack by its ``.idx``),
then one fsync of the directory. A crash leaves either no new pack or a whole one, never a pack
that names missing bytes; a left-over ``tmp_pack_*`` is removed by ``git gc`` as git's own are.

Small packs are merged (:func:`merge_small_packs`) so that their number stays bounded: lookups
in a repository probe every pack, and ``git gc --auto`` would otherwise repack the whole
repository once 50 have piled up. Packs are merged by tiers of size, as a log-structured store
merges its runs: :data:`MERGE_AT` packs of one tier become one pack of the next, so after ``n``
calls there are at most ``(MERGE_AT - 1)`` packs a tier and ``log(n)`` tiers, and each object is
rewritten once a tier (amortised: a few objects a call). A merge writes the new pack durably
before it removes the ones it replaces, so every object is on disk at every moment.

Objects are stored whole (no deltas): ``git gc`` deltifies them later, as it does a push's.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from applyonce.state.files import fsync_dir, write_new

# Packs from this size up are git's business (git gc), never merged here.
SMALL_PACK_BYTES = 64 << 20
# A tier holds packs of TIER_BASE * MERGE_AT**k bytes up to the next power; MERGE_AT of one tier
# are merged into one.
TIER_BASE = 16 << 10
MERGE_AT = 8
_LARGE_OFFSET = 0x80000000
_ZLIB_LEVEL = 1  # speed over size: git gc recompresses


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


def _pack_bytes(
    objects: Sequence[tuple[bytes, int, bytes]],
) -> tuple[bytes, list[tuple[bytes, int, int]]]:
    """The pack of ``objects`` ((raw id, type, data), in order) and each entry's (raw id, crc32,
    offset)."""
    parts = [b"PACK", struct.pack(">II", 2, len(objects))]
    offset = 12
    entries = []
    for raw_id, kind, data in objects:
        entry = _entry_header(kind, len(data)) + zlib.compress(data, _ZLIB_LEVEL)
        entries.append((raw_id, zlib.crc32(entry) & 0xFFFFFFFF, offset))
        parts.append(entry)
        offset += len(entry)
    body = b"".join(parts)
    return body + hashlib.sha1(body).digest(), entries


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


def write_pack(objects_dir: Path, objects: Iterable[tuple[str, int, bytes]]) -> str | None:
    """Write ``objects`` ((hex ID, git type, data)) as one pack in ``objects_dir/pack``, durably.
    Returns the pack's name (``pack-<sum>``), or None when there was nothing to write.

    Raises:
        OSError: the pack could not be written (nothing was renamed into place).
    """
    unique = {oid: (kind, data) for oid, kind, data in objects}
    if not unique:
        return None
    ordered = sorted((bytes.fromhex(oid), kind, data) for oid, (kind, data) in unique.items())
    pack, entries = _pack_bytes(ordered)
    index = _index_bytes(entries, pack[-20:])
    pack_dir = objects_dir / "pack"
    name = f"pack-{pack[-20:].hex()}"
    if (pack_dir / f"{name}.idx").exists():
        # The same objects, put there by another writer: its rename may not be durable yet.
        fsync_dir(pack_dir)
        return name
    token = secrets.token_hex(8)
    tmp_pack, tmp_index = pack_dir / f"tmp_pack_{token}", pack_dir / f"tmp_idx_{token}"
    try:
        write_new(tmp_pack, pack, mode=0o444)
        write_new(tmp_index, index, mode=0o444)
        os.replace(tmp_pack, pack_dir / f"{name}.pack")
        os.replace(tmp_index, pack_dir / f"{name}.idx")
    finally:
        for tmp in (tmp_pack, tmp_index):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    fsync_dir(pack_dir)
    return name


def pack_ids(index_path: Path) -> list[str]:
    """The hex IDs of the objects a version 2 pack index names."""
    data = index_path.read_bytes()
    if data[:8] != b"\xfftOc\x00\x00\x00\x02":
        raise ValueError(f"{index_path.name} is not a version 2 pack index")
    count = struct.unpack_from(">I", data, 8 + 255 * 4)[0]
    start = 8 + 256 * 4
    return [data[start + 20 * i : start + 20 * (i + 1)].hex() for i in range(count)]


def small_packs(objects_dir: Path) -> dict[Path, int]:
    """The small packs of ``objects_dir`` that may be merged (an index beside them, no
    ``.keep``, ``.promisor``, ``.mtimes`` or ``.bitmap``): their sizes by ``.pack`` path."""
    found: dict[Path, int] = {}
    with contextlib.suppress(FileNotFoundError), os.scandir(objects_dir / "pack") as it:
        names = {entry.name: entry for entry in it}
    for name, entry in names.items():
        if not name.endswith(".pack"):
            continue
        stem = name[: -len(".pack")]
        if f"{stem}.idx" not in names or any(
            f"{stem}.{other}" in names for other in ("keep", "promisor", "mtimes", "bitmap")
        ):
            continue  # kept, a partial clone's, a cruft pack or a bitmapped one: left to git
        with contextlib.suppress(OSError):
            size = entry.stat().st_size
            if size < SMALL_PACK_BYTES:
                found[Path(entry.path)] = size
    return found


def _tier(size: int) -> int:
    tier, bound = 0, TIER_BASE
    while size >= bound:
        tier, bound = tier + 1, bound * MERGE_AT
    return tier


def merge_small_packs(objects_dir: Path, read: Callable[[str], tuple[int, bytes]]) -> int:
    """Merge the packs of each tier that holds :data:`MERGE_AT` of them into one; ``read(oid)``
    gives an object's type and data. The merged pack is durable before any pack it replaces is
    removed. Returns how many packs were merged (0: no tier is full, or another process merged
    them first)."""
    if any((objects_dir / "pack").glob("multi-pack-index*")):
        # A multi-pack-index (git maintenance, scalar, repack --write-midx) names its packs:
        # removing one would break it. Such a repository's packs are git maintenance's business.
        return 0
    tiers: dict[int, list[Path]] = {}
    for pack, size in small_packs(objects_dir).items():
        tiers.setdefault(_tier(size), []).append(pack)
    merged_count = 0
    for tier in sorted(tiers):
        packs = sorted(tiers[tier])
        if len(packs) < MERGE_AT:
            continue
        objects = []
        try:
            for pack in packs:
                for oid in pack_ids(pack.with_suffix(".idx")):
                    objects.append((oid, *read(oid)))
        except (OSError, KeyError, ValueError):
            return merged_count  # merged or removed meanwhile by someone else: nothing is lost
        merged = write_pack(objects_dir, objects)
        for pack in packs:
            if pack.stem == merged:
                continue
            for suffix in (".idx", ".rev", ".pack"):  # the index first: then the pack is unseen
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(pack.with_suffix(suffix))
        fsync_dir(objects_dir / "pack")
        merged_count += len(packs)
    return merged_count
