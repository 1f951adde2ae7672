"""The audit checkpoint: per branch, the tip the last clean audit reached and what it proved.

``<state>/audit.json`` holds, for each branch audited clean (keyed by ref, or ``REMOTE/ref`` with
``--remote``), a :class:`Checkpoint`: the tip, the number and digest of the commits up to it whose
message names ``Call-Id``, the number and digest of the ledger rows the audit checked, and when.
It is a claim, never a proof: :mod:`applyonce.flow.inspect.audit` checks it against Git and the
ledger before it audits only what is new, and audits the whole history when it does not hold.
Losing it (or a concurrent audit of another branch overwriting its entry) costs one full audit.

Written as every state file is (:func:`~applyonce.state.files.atomic_write`: temp file, fsync,
rename, fsync of the directory).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import orjson

from applyonce.state.files import atomic_write

AUDIT_FILE = "audit.json"
SCHEMA = 1
_HEX = frozenset("0123456789abcdef")


class CheckpointError(Exception):
    """The checkpoint file cannot be used (its ``args[0]`` says why, for the audit's output)."""


@dataclass(frozen=True)
class Checkpoint:
    """What a clean audit of one branch proved, up to ``tip``."""

    tip: str
    commits: int  # commits up to tip whose message names Call-Id
    digest: str  # digest() of their IDs
    rows: int  # ledger rows checked (rows_digest)
    rows_digest: str  # digest() of their lines
    at: str  # when the audit started (ISO 8601, UTC)


def digest(lines: Iterable[str]) -> tuple[int, str]:
    """The count and SHA-256 of ``lines`` (sorted first, one a line: the order a walk or a
    query gives them in is no matter)."""
    h, count = hashlib.sha256(), 0
    for line in sorted(lines):
        h.update(line.encode() + b"\n")
        count += 1
    return count, h.hexdigest()


def _valid(entry: object) -> Checkpoint:
    if not isinstance(entry, dict):
        raise CheckpointError("its entry is not an object")
    try:
        checkpoint = Checkpoint(**entry)
    except TypeError:
        raise CheckpointError("its entry has not the fields applyonce writes") from None
    for name in ("tip", "digest", "rows_digest"):
        value = getattr(checkpoint, name)
        if not (isinstance(value, str) and len(value) in (40, 64) and set(value) <= _HEX):
            raise CheckpointError(f"its {name} is not a hex object name or digest")
    for name in ("commits", "rows"):
        value = getattr(checkpoint, name)
        if type(value) is not int or value < 0:
            raise CheckpointError(f"its {name} is not a count")
    if not isinstance(checkpoint.at, str) or not checkpoint.at:
        raise CheckpointError("its time is not a time")
    return checkpoint


def _entries(path: Path) -> dict[str, object]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CheckpointError(f"{AUDIT_FILE} is unreadable ({exc.strerror})") from None
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise CheckpointError(f"{AUDIT_FILE} is not JSON") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise CheckpointError(f"{AUDIT_FILE} is not schema {SCHEMA}")
    refs = doc.get("refs")
    if not isinstance(refs, dict):
        raise CheckpointError(f"{AUDIT_FILE} has no refs")
    return refs


def read_checkpoint(state_dir: Path, key: str) -> Checkpoint | None:
    """The checkpoint of ``key`` (None: there is none).

    Raises:
        CheckpointError: the file or its entry is not what applyonce writes.
    """
    entry = _entries(state_dir / AUDIT_FILE).get(key)
    return None if entry is None else _valid(entry)


def write_checkpoint(state_dir: Path, key: str, checkpoint: Checkpoint) -> None:
    """Record ``checkpoint`` for ``key`` (the other keys' kept; an unreadable file replaced).

    Raises:
        OSError: it could not be written.
    """
    path = state_dir / AUDIT_FILE
    try:
        refs = _entries(path)
    except CheckpointError:
        refs = {}
    refs[key] = asdict(checkpoint)
    doc = {"schema": SCHEMA, "refs": refs}
    atomic_write(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))
