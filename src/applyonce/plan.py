"""Plan a patch against a base tree. Pure: the tree is read through :class:`TreeReader`.

``plan(patch, base)`` resolves every operation against the base commit's files and returns the
complete set of file changes, or raises before anything is written. Every operation reads the
*base*: a path may appear only once in a patch (moves count both ends), so the order of operations
never changes the outcome.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Protocol

from applyonce.errors import ApplyOnceError
from applyonce.patch.apply import apply_hunks
from applyonce.patch.model import AddFile, DeleteFile, MatchLevel, Patch, UpdateFile
from applyonce.paths import UnsafePathError, parents

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


def check_unique_paths(patch: Patch) -> None:
    """Refuse two operations on one path, and Move-to-self."""
    seen: dict[str, int] = {}
    for number, op in enumerate(patch.operations, start=1):
        targets = [op.path]
        if isinstance(op, UpdateFile) and op.move_to is not None:
            if op.move_to == op.path:
                raise PlanError(
                    f"operation {number} moves {op.path} to itself",
                    path=op.path,
                    hint="drop the '*** Move to:' line",
                )
            targets.append(op.move_to)
        for target in targets:
            if target in seen:
                raise PlanError(
                    f"{target} is named by operations {seen[target]} and {number}",
                    path=target,
                    hint="merge the operations on one path into one",
                )
            seen[target] = number


def check_parents(base: TreeReader, path: str) -> None:
    for parent in parents(path):
        kind = base.kind(parent)
        if kind == "symlink":
            raise UnsafePathError(f"{path}: parent {parent} is a symlink", path=path)
        if kind in ("file", "submodule"):
            raise PlanError(f"{path}: parent {parent} is a file, not a directory", path=path)


def _existing_file(base: TreeReader, path: str, verb: str) -> None:
    kind = base.kind(path)
    if kind is None:
        raise PlanError(f"cannot {verb} {path}: no such file", path=path)
    if kind == "dir":
        raise PlanError(f"cannot {verb} {path}: it is a directory", path=path)
    if kind == "submodule":
        raise PlanError(f"cannot {verb} {path}: it is a submodule", path=path)


def plan(patch: Patch, base: TreeReader) -> TreePlan:
    """Resolve ``patch`` against ``base``.

    Raises:
        PlanError, UnsafePathError, HunkApplyError, BinaryFileError: nothing is planned.
    """
    check_unique_paths(patch)
    changes: list[FileChange] = []
    removed: list[str] = []
    for op in patch.operations:
        check_parents(base, op.path)
        if isinstance(op, AddFile):
            kind = base.kind(op.path)
            if kind in ("dir", "submodule"):
                raise PlanError(f"cannot add {op.path}: a {kind} is there", path=op.path)
            mode = MODE_FILE
            if kind == "file":
                mode = base.read(op.path)[1]  # Codex overwrites; keep an executable bit
            # A symlink is replaced by a regular file, never written through.
            changes.append(FileChange(op.path, "add", op.content.encode("utf-8"), mode))
        elif isinstance(op, DeleteFile):
            _existing_file(base, op.path, "delete")
            changes.append(FileChange(op.path, "delete", None, MODE_FILE))
            removed.append(op.path)
        else:
            _existing_file(base, op.path, "update")
            if base.kind(op.path) == "symlink":
                raise UnsafePathError(f"cannot update {op.path}: it is a symlink", path=op.path)
            data, mode = base.read(op.path)
            levels: list[MatchLevel] = []
            if op.hunks:
                data, levels = apply_hunks(data, op.hunks, path=op.path)
            if op.move_to is None:
                changes.append(FileChange(op.path, "update", data, mode, None, tuple(levels)))
                continue
            check_parents(base, op.move_to)
            dest = base.kind(op.move_to)
            if dest in ("dir", "submodule"):
                raise PlanError(f"cannot move to {op.move_to}: a {dest} is there", path=op.move_to)
            changes.append(FileChange(op.move_to, "move", data, mode, op.path, tuple(levels)))
            removed.append(op.path)
    return TreePlan(changes=tuple(changes), removed=tuple(removed))
