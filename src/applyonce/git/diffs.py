"""The unified diff of a call, in git's format, built from blobs: nothing is written.

* a committed call: its commit's parent against the commit, for the call's paths only;
* a dry run: the base tip against the plan's contents, held in memory (no blob is written: the
  object IDs on the ``index`` lines are computed, as ``git hash-object`` would without ``-w``).

libgit2 (:meth:`pygit2.Patch.create_from`) diffs the contents — hunks, ``\\ No newline at end of
file``, and the binary test (a NUL byte in the first 8000 bytes, as git's). The header lines around
them are written here, from what the call itself says: ``new file mode``, ``deleted file mode``,
``old mode``/``new mode``, and ``rename from``/``rename to`` for a move (the patch says it is a
move, so no similarity guess is made). A binary file's ``index`` line has full object IDs, as
with ``git diff --full-index`` (``git apply`` needs them to apply it). Paths are quoted as git
quotes them (``core.quotePath``'s
default), and a file that turns into a symlink (or back) is a deletion then an addition, as in
``git diff``. ``git apply`` applies the result to the parent; tests hold it to that.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pygit2

from applyonce.core.plan import MODE_LINK, MODE_TREE, TreePlan
from applyonce.git.store import GitStore, GitTree

ABBREV = 7  # the length of the object IDs on 'index' lines, as 'git diff' shows them
# libgit2 is given this one name for both sides: its header lines are then known exactly, and cut.
_NAME = "x"
_ESCAPES = {7: "a", 8: "b", 9: "t", 10: "n", 11: "v", 12: "f", 13: "r", 34: '"', 92: "\\"}


@dataclass(frozen=True)
class Side:
    """One side of a file's diff: its path, bytes and git mode."""

    path: str
    data: bytes
    mode: int


@dataclass(frozen=True)
class FileStat:
    """What the diff of one file adds and removes (a binary file counts no lines)."""

    path: str
    insertions: int
    deletions: int
    binary: bool = False


@dataclass(frozen=True)
class CallDiff:
    """The unified diff of a call (``text``: bytes, as file contents may not be UTF-8) and its
    numbers per file."""

    text: bytes
    files: tuple[FileStat, ...]

    @property
    def insertions(self) -> int:
        return sum(f.insertions for f in self.files)

    @property
    def deletions(self) -> int:
        return sum(f.deletions for f in self.files)

    @property
    def files_changed(self) -> int:
        return len(self.files)

    def as_text(self) -> str:
        """The diff as text for JSON: bytes that are not UTF-8 become U+FFFD (the bytes
        themselves are in :attr:`text`)."""
        return self.text.decode("utf-8", "replace")

    def diffstat(self) -> dict[str, Any]:
        """``{files_changed, insertions, deletions, files: [{path, insertions, deletions,
        binary}]}``, as the JSON outputs carry it."""
        return {
            "files_changed": self.files_changed,
            "insertions": self.insertions,
            "deletions": self.deletions,
            "files": [dataclasses.asdict(f) for f in self.files],
        }


def quote_path(path: str) -> str:
    """``path`` as git writes it in a diff header: C-quoted when it holds a control character, a
    quote, a backslash or a byte above 0x7f (``core.quotePath`` true), else as it is."""
    raw = path.encode("utf-8", "surrogateescape")
    if not any(b < 0x20 or b in (34, 92) or b >= 0x7F for b in raw):
        return path
    out = []
    for b in raw:
        if b in _ESCAPES:
            out.append("\\" + _ESCAPES[b])
        elif b < 0x20 or b >= 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


def _name(prefix: str, path: str) -> str:
    """``a/path``, quoted as a whole when it needs quoting (``"a/t\\tb"``)."""
    return quote_path(prefix + path)


def _label(name: str | None, side: Side | None) -> str:
    """A ``---``/``+++`` label: ``/dev/null`` for an absent side; else the name, followed by a tab
    when its path holds a space (git's, quoted or not, so that ``patch`` reads it whole)."""
    if name is None or side is None:
        return "/dev/null"
    return name + "\t" if " " in side.path else name


def _hunks(old: bytes, new: bytes) -> tuple[bytes, int, int, bool]:
    """The hunks between two contents as libgit2 writes them, with the lines added and removed,
    and whether git would call the contents binary."""
    patch = pygit2.Patch.create_from(old, new, old_as_path=_NAME, new_as_path=_NAME)
    _, insertions, deletions = patch.line_stats
    if patch.delta.is_binary:
        return b"", 0, 0, True
    data = patch.data
    # The header libgit2 writes for the fixed name ends with the '+++ b/x' (or '/dev/null') line.
    start = data.find(b"\n+++ ")
    if start < 0:
        return b"", insertions, deletions, False
    return data[data.index(b"\n", start + 1) + 1 :], insertions, deletions, False


def _file_diff(old: Side | None, new: Side | None) -> tuple[bytes, FileStat]:
    """The git diff of one file from ``old`` to ``new`` (None: absent on that side)."""
    either = new or old
    assert either is not None
    old_name = _name("a/", old.path) if old else None
    new_name = _name("b/", new.path) if new else None
    # An added or deleted file names its one path on both sides, as git does.
    first = old_name or _name("a/", either.path)
    second = new_name or _name("b/", either.path)
    lines = [f"diff --git {first} {second}"]
    if old is None:
        lines.append(f"new file mode {either.mode:o}")
    elif new is None:
        lines.append(f"deleted file mode {old.mode:o}")
    else:
        if old.mode != new.mode:
            lines += [f"old mode {old.mode:o}", f"new mode {new.mode:o}"]
        if old.path != new.path:
            lines += [f"rename from {quote_path(old.path)}", f"rename to {quote_path(new.path)}"]
    old_data = old.data if old else b""
    new_data = new.data if new else b""
    old_id = str(pygit2.hash(old_data)) if old else ""
    new_id = str(pygit2.hash(new_data)) if new else ""
    old_id = old_id or "0" * len(new_id)
    new_id = new_id or "0" * len(old_id)
    body, insertions, deletions, binary = b"", 0, 0, False
    if old_id != new_id:
        body, insertions, deletions, binary = _hunks(old_data, new_data)
        same_mode = old is not None and new is not None and old.mode == new.mode
        # A binary file gets full IDs ('git diff --full-index'): without them 'git apply'
        # refuses it, with them it applies what the object store holds.
        width = len(old_id) if binary else ABBREV
        index = f"index {old_id[:width]}..{new_id[:width]}"
        lines.append(index + (f" {either.mode:o}" if same_mode else ""))
        if binary:
            from_name, to_name = old_name or "/dev/null", new_name or "/dev/null"
            lines.append(f"Binary files {from_name} and {to_name} differ")
        elif body:
            lines += [f"--- {_label(old_name, old)}", f"+++ {_label(new_name, new)}"]
    header = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")
    return header + body, FileStat(either.path, insertions, deletions, binary)


def unified_diff(pairs: Iterable[tuple[Side | None, Side | None]]) -> CallDiff:
    """The git diff of the file pairs ``(old, new)``, in their order."""
    texts: list[bytes] = []
    stats: list[FileStat] = []
    for old, new in pairs:
        if old == new:  # nothing to show (both absent, or the same file)
            continue
        if (
            old is not None
            and new is not None
            and (old.mode == MODE_LINK) != (new.mode == MODE_LINK)
        ):
            # A type change is two entries in git's diff: the old one goes, the new one comes.
            split: list[tuple[Side | None, Side | None]] = [(old, None), (None, new)]
        else:
            split = [(old, new)]
        for a, b in split:
            text, stat = _file_diff(a, b)
            texts.append(text)
            stats.append(stat)
    return CallDiff(b"".join(texts), tuple(stats))


def _side(tree: GitTree, path: str | None) -> Side | None:
    """The file at ``path`` in ``tree`` (None: no file there, or not a blob)."""
    if path is None:
        return None
    entry = tree.entry(path)
    if entry is None or entry.filemode in (MODE_TREE, 0o160000):
        return None
    data, mode = tree.read(path)
    return Side(path, data, mode)


def commit_diff(
    store: GitStore, commit: str, files: Sequence[tuple[str, str, str | None]]
) -> CallDiff:
    """The diff of a call's ``commit`` against its parent, for the call's ``files`` only.

    Args:
        store: the repository.
        commit: the call's commit.
        files: ``(path, action, from)`` of each file the receipt records.
    """
    old_tree = store.tree_at(store.parent_of(commit))
    new_tree = store.tree_at(commit)
    pairs = []
    for path, action, from_path in files:
        old_path = from_path if action == "move" else path
        new = None if action == "delete" else _side(new_tree, path)
        pairs.append((_side(old_tree, old_path), new))
    return unified_diff(pairs)


def plan_diff(store: GitStore, base: str | None, plan: TreePlan) -> CallDiff:
    """The diff ``plan`` would commit on ``base``, from the plan's contents in memory."""
    old_tree = store.tree_at(base)
    pairs = []
    for change in plan.changes:
        old_path = change.from_path if change.action == "move" else change.path
        new = None if change.content is None else Side(change.path, change.content, change.mode)
        pairs.append((_side(old_tree, old_path), new))
    return unified_diff(pairs)


__all__ = [
    "CallDiff",
    "FileStat",
    "Side",
    "commit_diff",
    "plan_diff",
    "quote_path",
    "unified_diff",
]
