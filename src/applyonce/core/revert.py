"""Undo (``applyonce revert``): the arguments of a revert call, and its plan. Pure.

A revert is a call like any other (docs/design.md §1): one commit, exactly once. Its identity comes
from
the call it reverts, not from the change it computes, so repeating ``applyonce revert X`` is the
same call whatever the branch looks like by then::

    args = {"ref": …, "reverts": <call_id of X>, "commit": <X's commit>}
    call_id = the formula of docs/design.md §3 with tool "revert_patch"

Its plan is the reverse of X's commit ``C`` (parent ``P``) applied to the tip, one path at a time,
as a three-way merge whose ancestor is ``C``: a path the tip still has as ``C`` wrote it gets
``P``'s version back; one later commits changed elsewhere gets a line-level merge (``merge``,
libgit2's, injected); one whose changed lines were changed again is a conflict, and the whole
revert is refused naming those paths.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict

from applyonce.core.identity import canonical, sha256_hex
from applyonce.core.plan import MODE_EXEC, MODE_FILE, FileChange, TreePlan
from applyonce.errors import ApplyOnceError, ConflictError

REVERT_TOOL = "revert_patch"
# The revert semantics (a change to them gives the same revert a new identity).
REVERT_TOOL_VERSION = "applyonce-revert/1"
REVERTS_TRAILER = "Reverts-Call-Id"

# A path's version in a tree: (blob ID, git file mode); (None, None) when it is not there.
Version = tuple[str | None, int | None]
ABSENT: Version = (None, None)


class RevertArgs(BaseModel):
    """The normalised arguments of one ``revert_patch`` call: which call, its commit, where."""

    # Built by the first revert, not when applyonce starts.
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    ref: str
    reverts: str
    commit: str

    def canonical(self) -> bytes:
        return canonical(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return sha256_hex(self.canonical())


class RevertConflictError(ConflictError):
    """Later commits changed the lines the reverted call wrote: its reverse no longer applies.

    A conflict with the branch as it is now (exit 4), not a bad request: once those commits are
    undone, the same revert can run, so the refusal is retryable."""

    kind = "revert-conflict"
    default_retryable = True
    default_hint = (
        "undo or revert those later changes first, or change the files by hand with apply_patch"
    )


class NothingToRevertError(ApplyOnceError):
    """Every path the call changed is already as it was before the call."""

    kind = "nothing-to-revert"
    default_retryable = True
    default_hint = "the change is already undone on the branch; there is nothing to do"


class VersionReader(Protocol):
    """A tree, as the revert reads it."""

    def version(self, path: str) -> Version:
        """The path's blob ID and mode ((None, None): no file there)."""

    def read(self, path: str) -> tuple[bytes, int]:
        """The bytes and git file mode of the file at ``path`` (it exists)."""


# merge(path, ancestor blob, ours blob, theirs blob) -> merged bytes, or None on a conflict.
Merge = Callable[[str, str, str, str], bytes | None]


@dataclass(frozen=True)
class CommitChange:
    """One file change of the reverted commit: git's letter (A, M, T, D, R), its path (the new
    one of a rename) and the path before."""

    status: str
    path: str
    old_path: str


def plan_revert(
    changes: Sequence[CommitChange],
    before: VersionReader,
    after: VersionReader,
    tip: VersionReader,
    merge: Merge,
) -> TreePlan:
    """The plan that undoes ``changes`` (``before`` → ``after``) on ``tip``.

    Raises:
        RevertConflictError: a path was changed again by later commits (``paths`` names them).
        NothingToRevertError: the tip already has every path as ``before`` had it.
        ApplyOnceError: a path cannot be written back (a symlink or submodule before the call).
    """
    planned: list[FileChange] = []
    removed: list[str] = []
    conflicts: list[str] = []
    for change in changes:
        if change.status == "A":
            now, wrote = tip.version(change.path), after.version(change.path)
            if now == ABSENT:
                continue  # removed since: nothing left to undo
            if now != wrote:
                conflicts.append(change.path)
                continue
            planned.append(FileChange(change.path, "delete", None, MODE_FILE))
            removed.append(change.path)
        elif change.status == "D":
            now, was = tip.version(change.path), before.version(change.path)
            if now == was:
                continue
            if now != ABSENT:
                conflicts.append(change.path)  # a later commit made a file there again
                continue
            data, mode = _restorable(before, change.path)
            planned.append(FileChange(change.path, "add", data, mode))
        elif change.status == "R":
            # Moved old_path -> path: the file goes back to old_path with its old lines.
            source, target = change.path, change.old_path
            if tip.version(target) != ABSENT:
                conflicts.append(target)
                continue
            merged = _three_way(source, after, tip, before, target, merge)
            if merged is None:
                conflicts.append(source)
                continue
            planned.append(FileChange(target, "move", merged[0], merged[1], from_path=source))
            removed.append(source)
        else:  # M, T: the file changed in place
            merged = _three_way(change.path, after, tip, before, change.path, merge)
            if merged is None:
                conflicts.append(change.path)
                continue
            if tip.version(change.path) == before.version(change.path):
                continue  # already as it was
            planned.append(FileChange(change.path, "update", merged[0], merged[1]))
    if conflicts:
        raise RevertConflictError(
            "later commits changed what it wrote in " + ", ".join(sorted(set(conflicts))),
            paths=sorted(set(conflicts)),
        )
    if not planned:
        raise NothingToRevertError("every file the call changed is already as it was before it")
    return TreePlan(changes=tuple(planned), removed=tuple(removed))


def _restorable(tree: VersionReader, path: str) -> tuple[bytes, int]:
    """The file ``path`` of ``tree`` as applyonce may write it back: a regular file."""
    data, mode = tree.read(path)
    if mode not in (MODE_FILE, MODE_EXEC):
        raise ApplyOnceError(
            f"cannot revert: {path} was not a regular file before the call (mode {mode:o})",
            path=path,
            hint="restore it by hand with git",
        )
    return data, mode


def _three_way(
    path: str,
    ancestor_tree: VersionReader,
    ours_tree: VersionReader,
    theirs_tree: VersionReader,
    theirs_path: str,
    merge: Merge,
) -> tuple[bytes, int] | None:
    """Merge ``theirs`` (the file before the call, at ``theirs_path``) into ``ours`` (the tip's
    ``path``), with the call's version as the ancestor. None: a conflict."""
    ancestor, ours, theirs = (
        ancestor_tree.version(path),
        ours_tree.version(path),
        theirs_tree.version(theirs_path),
    )
    if ours == ABSENT or ancestor == ABSENT or theirs == ABSENT:
        return None
    data, _ = _restorable(theirs_tree, theirs_path)
    mode = _merge_mode(ancestor[1], ours[1], theirs[1])
    if mode is None:
        return None
    if ours[0] == ancestor[0] or ours[0] == theirs[0]:
        return data, mode
    assert ancestor[0] is not None and ours[0] is not None and theirs[0] is not None
    merged = merge(path, ancestor[0], ours[0], theirs[0])
    return None if merged is None else (merged, mode)


def _merge_mode(ancestor: int | None, ours: int | None, theirs: int | None) -> int | None:
    if ours == ancestor:
        return theirs
    if theirs in (ancestor, ours):
        return ours
    return None
