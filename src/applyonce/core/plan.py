"""Plan a patch against a base tree. Pure: the tree is read through :class:`TreeReader`.

``plan(patch, base)`` resolves every operation against the base commit's files and returns the
complete set of file changes, or raises before anything is written. Every operation reads the
*base*: a path may be written by only one operation of a patch (moves count both ends; the source
of a copy is only read, so another operation may change it), so the order of operations never
changes the outcome. Several text-editor commands on one file are one :class:`EditFile`
operation, whose commands apply in order, each to the previous one's result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from applyonce.core.gitmeta import check_git_metadata
from applyonce.core.paths import UnsafePathError, parents
from applyonce.errors import ApplyOnceError
from applyonce.patch.apply import apply_hunks
from applyonce.patch.edit import apply_edit_commands
from applyonce.patch.limits import Limits, write_error
from applyonce.patch.match import BOM, GIT_BINARY_WINDOW, BinaryFileError
from applyonce.patch.model import (
    AddFile,
    CopyFile,
    DeleteFile,
    EditFile,
    FileMode,
    FileOp,
    Hunk,
    MatchLevel,
    Patch,
    UpdateFile,
)

MODE_FILE = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_TREE = 0o040000
MODE_GITLINK = 0o160000

EntryKind = Literal["file", "dir", "symlink", "submodule"]
Action = Literal["add", "update", "delete", "move"]


class TreeReader(Protocol):
    """Read access to the base tree."""

    def kind(self, path: str) -> EntryKind | None:
        """What ``path`` is in the base tree, or None if absent."""

    def read(self, path: str) -> tuple[bytes, int]:
        """The bytes and git file mode of the file at ``path`` (it exists)."""


class PlanError(ApplyOnceError):
    """An operation does not fit the base tree (missing file, directory, duplicate path, …)."""

    kind = "plan"
    default_hint = "re-read the repository and send a patch for its current files"


class AlreadyExistsError(PlanError):
    """A patch creates a path (a new file, a rename's or a copy's destination) that is already
    there: a unified diff (``git apply`` refuses it), a Codex ``Add File`` or ``Move to``, a
    text-editor ``create``, a SEARCH/REPLACE block with an empty SEARCH. applyonce refuses it
    rather than overwrite the file by surprise."""

    kind = "already-exists"
    default_hint = (
        "update the file instead: Codex '*** Update File: PATH' with hunks, a diff with "
        "'--- a/PATH' and '+++ b/PATH', or blocks whose SEARCH holds the lines to change"
    )


@dataclass(frozen=True)
class FileChange:
    """One path's new state. ``content`` is None for a deletion."""

    path: str
    action: Action
    content: bytes | None
    mode: int
    from_path: str | None = None
    match_levels: tuple[MatchLevel, ...] = ()


@dataclass(frozen=True)
class TreePlan:
    """Every change a patch makes to a tree, in patch order."""

    changes: tuple[FileChange, ...]
    removed: tuple[str, ...] = field(default=())  # paths that disappear (deletes and move sources)

    def summary_lines(self) -> list[str]:
        """Codex-style ``A path`` / ``M path`` / ``D path`` lines."""
        out: list[str] = []
        for change in self.changes:
            letter = {"add": "A", "update": "M", "move": "M", "delete": "D"}[change.action]
            out.append(f"{letter} {change.path}")
        return out


def _written_paths(number: int, op: FileOp) -> list[str]:
    """The paths ``op`` writes (a move writes both ends; a copy only its destination)."""
    if isinstance(op, CopyFile):
        if op.copy_to == op.path:
            raise PlanError(
                f"operation {number} copies {op.path} to itself",
                path=op.path,
                hint="drop the 'copy from'/'copy to' lines",
            )
        return [op.copy_to]
    if isinstance(op, UpdateFile) and op.move_to is not None:
        if op.move_to == op.path:
            raise PlanError(
                f"operation {number} moves {op.path} to itself",
                path=op.path,
                hint="drop the rename ('*** Move to:', or 'rename from'/'rename to')",
            )
        return [op.path, op.move_to]
    return [op.path]


def check_unique_paths(patch: Patch) -> None:
    """Refuse two operations writing one path, and a move or copy to itself."""
    seen: dict[str, int] = {}
    for number, op in enumerate(patch.operations, start=1):
        for target in _written_paths(number, op):
            if target in seen:
                raise PlanError(
                    f"{target} is named by operations {seen[target]} and {number}",
                    path=target,
                    hint="merge the operations on one path into one",
                )
            seen[target] = number


def _check_no_file_under_a_file(changes: list[FileChange]) -> None:
    """Refuse a plan that writes a file at ``a`` and another at ``a/b``: a tree cannot hold both,
    and one of them would silently be missing from the commit. (``check_parents`` asks the base
    tree; this asks the plan itself.)"""
    files = {change.path for change in changes if change.content is not None}
    for path in sorted(files):
        for parent in parents(path):
            if parent in files:
                raise PlanError(
                    f"{path}: parent {parent} is a file this patch writes, not a directory",
                    path=path,
                    hint=f"write {parent} or {path}, not both",
                )


def check_parents(base: TreeReader, path: str) -> None:
    for parent in parents(path):
        kind = base.kind(parent)
        if kind == "symlink":
            raise UnsafePathError(f"{path}: parent {parent} is a symlink", path=path)
        if kind == "submodule":
            raise PlanError(
                f"{path}: {parent} is a submodule",
                path=path,
                hint=f"change it in its own repository (the one checked out at {parent})",
            )
        if kind == "file":
            raise PlanError(f"{path}: parent {parent} is a file, not a directory", path=path)


def _existing_file(base: TreeReader, path: str, verb: str, written_as: str | None = None) -> None:
    kind = base.kind(path)
    if kind is None:
        hint = None
        if written_as not in (None, path) and base.kind(written_as) == "file":
            hint = (
                f"the diff names {written_as}, which git apply reads as {path} (it removes the"
                f" first component, as -p1); write '--- a/{written_as}' and '+++ b/{written_as}'"
            )
        raise PlanError(f"cannot {verb} {path}: no such file", path=path, hint=hint)
    if kind == "dir":
        raise PlanError(f"cannot {verb} {path}: it is a directory", path=path)
    if kind == "submodule":
        raise PlanError(
            f"cannot {verb} {path}: it is a submodule",
            path=path,
            hint=f"change it in its own repository (the one checked out at {path})",
        )


def plan(patch: Patch, base: TreeReader, *, limits: Limits | None = None) -> TreePlan:
    """Resolve ``patch`` against ``base``; with ``limits``, stop as soon as the files written
    hold more than ``limits.write_bytes`` (so a plan never holds much more than that).

    Raises:
        PlanError, UnsafePathError, HunkApplyError, BinaryFileError: nothing is planned.
        LimitError: over ``limits.write_bytes``.
    """
    check_unique_paths(patch)
    changes: list[FileChange] = []
    removed: list[str] = []
    written = _Written(limits)
    for op in patch.operations:
        written.check(changes)
        check_parents(base, op.path)
        if isinstance(op, AddFile):
            _writable(base, op.path, "add")
            if op.refuse_existing:
                _absent(base, op.path, f"cannot add {op.path}: it already exists")
            before = base.read(op.path) if base.kind(op.path) == "file" else None
            mode = _mode(op.mode, MODE_FILE)
            if op.mode is None and before is not None:
                mode = before[1]  # an AddFile made to replace (Python API): keep the x bit
            # A symlink is replaced by a regular file, never written through.
            content = op.content.encode("utf-8", "surrogateescape")  # unified: bytes kept
            if before != (content, mode):  # re-adding a file as it is changes nothing
                changes.append(FileChange(op.path, "add", _text_written(op.path, content), mode))
        elif isinstance(op, DeleteFile):
            _existing_file(base, op.path, "delete", op.written_as)
            if op.expected is not None:
                _check_deleted_lines(base, op.path, op.expected)
            changes.append(FileChange(op.path, "delete", None, MODE_FILE))
            removed.append(op.path)
        elif isinstance(op, EditFile):
            change = _plan_edit(op, base)
            if change is not None:
                changes.append(change)
                if change.content is None:
                    removed.append(op.path)
        elif isinstance(op, UpdateFile) and _creates_by_hunk(base, op):
            # git apply's rule for a diff that shows no old side: one hunk of added lines only,
            # on a path that is not there, creates the file.
            data = _text_written(op.path, apply_hunks(b"", op.hunks, path=op.path)[0])
            changes.append(FileChange(op.path, "add", data, _mode(op.mode, MODE_FILE)))
        else:
            verb = "copy" if isinstance(op, CopyFile) else "update"
            written_as = op.written_as if isinstance(op, UpdateFile) else None
            data, mode = before = _read_text_file(base, op.path, verb, written_as)
            levels: list[MatchLevel] = []
            if op.hunks:
                data, levels = apply_hunks(data, op.hunks, path=op.path)
                # A unified diff's file is text as git reads it: a NUL past git's binary window
                # (one the diff shows as text) is written as git apply writes it.
                positioned = all(hunk.old_start is not None for hunk in op.hunks)
                window = GIT_BINARY_WINDOW if positioned else None
                data = _text_written(op.path, data, window)
            # Without hunks, a move or copy takes the file as it is, binary or not (git too).
            mode = _mode(op.mode, mode)
            if isinstance(op, CopyFile):
                check_parents(base, op.copy_to)
                _writable(base, op.copy_to, "copy to")
                _absent(
                    base, op.copy_to, f"cannot copy {op.path} to {op.copy_to}: it already exists"
                )
                changes.append(FileChange(op.copy_to, "add", data, mode, op.path, tuple(levels)))
            elif op.move_to is None:
                if (data, mode) != before:  # a context-only hunk changes nothing
                    changes.append(FileChange(op.path, "update", data, mode, None, tuple(levels)))
            else:
                check_parents(base, op.move_to)
                _writable(base, op.move_to, "move to")
                if op.refuse_existing:
                    _absent(
                        base,
                        op.move_to,
                        f"cannot rename {op.path} to {op.move_to}: it already exists",
                        hint=f"move it to a path that is not there, or delete {op.move_to} "
                        "in a call of its own first",
                    )
                changes.append(FileChange(op.move_to, "move", data, mode, op.path, tuple(levels)))
                removed.append(op.path)
    written.check(changes)
    _check_no_file_under_a_file(changes)
    # An operation that leaves its file as it was is no change: it is left out above, and a patch
    # of only such is refused, never published as an empty commit.
    if not changes:
        raise PlanError(
            "the patch changes nothing", hint="send a patch that changes at least one file"
        )
    # .gitmodules and friends: what 'git fsck --strict' would refuse is never committed.
    check_git_metadata((change.path, change.content, change.mode) for change in changes)
    return TreePlan(changes=tuple(changes), removed=tuple(removed))


@dataclass
class _Written:
    """The bytes the changes planned so far write, against ``limits.write_bytes``."""

    limits: Limits | None
    total: int = 0
    counted: int = 0

    def check(self, changes: list[FileChange]) -> None:
        if self.limits is None:
            return
        self.total += sum(len(change.content or b"") for change in changes[self.counted :])
        self.counted = len(changes)
        if self.total > self.limits.write_bytes:
            raise write_error(self.total, self.limits, bound=False)


def _text_written(path: str, data: bytes, window: int | None = None) -> bytes:
    """Text in, text out: a NUL byte in what a patch writes can only come from the patch text
    (with ``window``: a NUL in its first ``window`` bytes, git's binary test)."""
    if b"\x00" in (data if window is None else data[:window]):
        raise BinaryFileError(
            f"{path}: the patch writes a NUL byte; applyonce only writes text",
            path=path,
            hint="remove the NUL byte from the patch",
        )
    return data


def _check_deleted_lines(base: TreeReader, path: str, expected: tuple[Hunk, ...]) -> None:
    """A unified diff's deletion shows the file's lines: the file must still be just those."""
    data = base.read(path)[0]
    left = apply_hunks(data, expected, path=path)[0] if expected else data
    if left not in (b"", BOM.encode("utf-8")):
        raise PlanError(
            f"cannot delete {path}: it has lines the diff does not show (it changed since)",
            path=path,
        )


def _mode(wanted: FileMode | None, default: int) -> int:
    return default if wanted is None else int(wanted, 8)


def _writable(base: TreeReader, path: str, verb: str) -> None:
    kind = base.kind(path)
    if kind in ("dir", "submodule"):
        raise PlanError(f"cannot {verb} {path}: a {kind} is there", path=path)


def _absent(base: TreeReader, path: str, message: str, hint: str | None = None) -> None:
    if base.kind(path) is not None:
        raise AlreadyExistsError(message, path=path, hint=hint)


def _creates_by_hunk(base: TreeReader, op: UpdateFile) -> bool:
    """Does ``op`` create its file, as ``git apply`` reads a diff that names the file on both
    sides (no ``/dev/null``) but shows no old line: the path is not there, nothing moves, and its
    one hunk, positioned by line numbers (a unified diff's), only adds lines?"""
    return (
        op.move_to is None
        and len(op.hunks) == 1
        and op.hunks[0].old_start is not None
        and not op.hunks[0].old_lines
        and base.kind(op.path) is None
    )


def _read_text_file(
    base: TreeReader, path: str, verb: str, written_as: str | None = None
) -> tuple[bytes, int]:
    _existing_file(base, path, verb, written_as)
    if base.kind(path) == "symlink":
        raise UnsafePathError(f"cannot {verb} {path}: it is a symlink", path=path)
    return base.read(path)


def _plan_edit(op: EditFile, base: TreeReader) -> FileChange | None:
    """Run ``op``'s commands in order on the base file; None when that changes nothing (it
    neither was nor is there, or it is as it was)."""
    kind = base.kind(op.path)
    if kind in ("dir", "submodule"):
        raise PlanError(f"cannot edit {op.path}: it is a {kind}", path=op.path)
    data: bytes | None = None
    mode = MODE_FILE
    if kind == "file":
        data, mode = base.read(op.path)
    elif kind == "symlink":
        if op.commands[0].command not in ("create", "delete"):
            raise UnsafePathError(f"cannot edit {op.path}: it is a symlink", path=op.path)
        data = b""  # only replaced or removed, never read or written through
    new = apply_edit_commands(data, op.commands, path=op.path)
    if new is not None:
        new = _text_written(op.path, new)
    if kind is None:
        return None if new is None else FileChange(op.path, "add", new, mode)
    if new is None:
        return FileChange(op.path, "delete", None, MODE_FILE)
    if kind == "file" and new == data:
        return None  # the commands leave the file as it was
    return FileChange(op.path, "update" if kind == "file" else "add", new, mode)
