"""The user's uncommitted changes on the paths a call touches (``--dirty refuse|commit``).

``refuse`` (the default): a touched path that is modified, staged, or untracked where the patch
adds a file is a conflict (exit 4), found before anything is staged.

``commit``: those paths are first committed as their work-tree contents (as ``git commit --
PATH`` would, and as Aider does), in a *snapshot* commit on the branch tip, subject
``applyonce: uncommitted changes before <call>``, trailer ``Snapshot-For: <call ID>``; the call
is staged and committed on top of it. Both are published by the call's one compare-and-swap of
the branch (tip → the call's commit, whose parent is the snapshot), so no crash can publish one
without the other: before the publish nothing is on the branch (the two objects are garbage and a
repeat builds them again), after it recovery finds the call's commit by its ``Call-Id`` and
adopts it by planning the call on its parent, the snapshot. The snapshot carries no
``Call-Id``: audit, recovery and adoption never take it for the call. The call's receipt names
the snapshot as its ``base_commit`` (every committed receipt's base is its commit's parent); the
``commit-object`` event of the ledger records it as ``snapshot`` beside the tip it was built on.

Changes are what the user made to what the checkout shows, not differences from a tip the
checkout has not caught up with (:mod:`applyonce.flow.checkouts.lag`): a file that still holds the
branch's older version is no change of the user's, and committing it would undo the commits since.

Refused even with ``commit``: a path staged in one version and edited again in the work tree
(committing the work tree's version would silently drop the staged one); an untracked file (it
may hold anything, a credential say: only the user's own ``git add`` puts it into history); and a
change made on an older version of the path than the branch's (committing it would undo the
branch's later change there).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from applyonce.core.identity import CallIdentity
from applyonce.core.message import SNAPSHOT_FOR, build_snapshot_message
from applyonce.core.receipt import Receipt
from applyonce.faults import fault
from applyonce.flow.context import Context
from applyonce.flow.options import DirtyMode
from applyonce.git.checkouts import Shown
from applyonce.git.store import GitTree


@dataclass(frozen=True)
class Snapshot:
    """The commit of the user's changes a call is staged on (not published by itself)."""

    commit: str
    tree: GitTree
    paths: tuple[str, ...]


def take_dirty(
    ctx: Context,
    ident: CallIdentity,
    ref: str,
    base: str | None,
    base_tree: GitTree,
    paths: Iterable[str],
    mode: DirtyMode,
    shown: Shown | None = None,
) -> Snapshot | None:
    """Refuse the user's changes on ``paths``, or commit them (unpublished) on ``base``.
    ``shown``: what the checkouts may show besides ``base`` (see
    :mod:`applyonce.flow.checkouts.lag`): a path that holds one of those versions is the branch's,
    not the user's, and a change made on one of them is never committed on ``base`` (that would undo
    the branch's change since).

    Returns:
        The snapshot to stage the call on; None when no touched path has changes.

    Raises:
        DirtyPathError: ``refuse`` and a touched path has changes; or ``commit`` and a change
            cannot be committed as it is (see ``Checkouts.dirty_versions``).
    """
    if mode == "refuse":
        ctx.checkouts.find_dirty_paths(
            ref, base_tree, paths, base_commit=base, shown=shown, remote=ctx.remote
        )
        return None
    ctx.store.written.reset()  # the snapshot's objects are the first of this staging
    dirty = ctx.checkouts.dirty_versions(
        ref, base_tree, paths, base_commit=base, shown=shown, remote=ctx.remote
    )
    if not dirty:
        return None
    versions = {d.path: d.current for d in dirty}
    tree_id = ctx.store.write_tree_of(base_tree, versions)
    message = build_snapshot_message(ident.call_id, list(versions))
    commit = ctx.store.create_commit(tree_id, base, message)
    fault("after-snapshot")
    return Snapshot(commit, ctx.store.tree_at(commit), tuple(sorted(versions)))


def is_snapshot_of(ctx: Context, commit: str | None, call_id: str) -> bool:
    """Whether ``commit`` is the snapshot of ``call_id``'s uncommitted changes."""
    if commit is None or not ctx.store.has_object(commit):
        return False
    return call_id in ctx.store.trailers_of(commit).all(SNAPSHOT_FOR)


def sync_base(ctx: Context, receipt: Receipt) -> str | None:
    """Where the checkout sync of ``receipt``'s call starts: its base, or the base below its
    snapshot (the checkout may still hold that version in the index or the work tree)."""
    base = receipt.base_commit
    if is_snapshot_of(ctx, base, receipt.call_id):
        assert base is not None
        return ctx.store.parent_of(base)
    return base
