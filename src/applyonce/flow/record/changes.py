"""What a call changes, whatever kind of call it is: a patch (``apply_patch``) or the undoing of
an earlier call's commit (``revert_patch``). The corridor (:mod:`applyonce.flow.call.apply`) and
adoption (:mod:`applyonce.flow.record.adopt`) plan either through here, so staging, checks, the
publish, receipts, recovery and audit are one path for both.
"""

from __future__ import annotations

from applyonce.core.identity import ApplyPatchArgs, CallIdentity
from applyonce.core.land import (
    LAND_TOOL,
    LANDS_TRAILER,
    LANE_COMMIT_TRAILER,
    LandArgs,
    LandConflictError,
    plan_pick,
)
from applyonce.core.plan import TreePlan, TreeReader, plan
from applyonce.core.revert import (
    REVERT_TOOL,
    REVERTS_TRAILER,
    CommitChange,
    RevertArgs,
    RevertConflictError,
    plan_revert,
)
from applyonce.errors import ApplyOnceError
from applyonce.flow.context import Context
from applyonce.flow.record.lanes import CallArgs as CallArgs
from applyonce.flow.record.lanes import lane_call_args
from applyonce.git.merge import commits_changing, merge_blobs
from applyonce.git.store import GitTree
from applyonce.patch.limits import Limits


class RevertedCommitGoneError(ApplyOnceError):
    kind = "reverted-commit-gone"
    default_hint = "there is nothing of it to undo on this branch"


def is_revert(ident: CallIdentity) -> bool:
    return ident.tool == REVERT_TOOL


def is_land(ident: CallIdentity) -> bool:
    return ident.tool == LAND_TOOL


def touched_paths(ctx: Context, args: CallArgs) -> list[str]:
    """Every path the call may write (a move's both ends), in order, without repeats."""
    if isinstance(args, RevertArgs | LandArgs):
        changes = ctx.store.changes_in(ctx.store.parent_of(args.commit), args.commit)
        return list(dict.fromkeys(p for c in changes for p in (c.path, c.old_path)))
    return args.patch().touched_paths()


def plan_call(
    ctx: Context,
    args: CallArgs,
    base_commit: str | None,
    base: TreeReader,
    *,
    limits: Limits | None = None,
) -> TreePlan:
    """The call's changes on ``base``, the tree of ``base_commit``.

    Raises:
        ApplyOnceError: they do not apply; nothing is planned.
    """
    if isinstance(args, ApplyPatchArgs):
        return plan(args.patch(), base, limits=limits)
    assert isinstance(base, GitTree)
    if isinstance(args, LandArgs):
        return _plan_land(ctx, args, base, limits=limits)
    return _plan_revert(ctx, args, base_commit, base)


def extra_trailers(args: CallArgs) -> list[tuple[str, str]]:
    """The call's trailers beside applyonce's own (a revert names the call it undoes)."""
    if isinstance(args, RevertArgs):
        return [(REVERTS_TRAILER, args.reverts)]
    if isinstance(args, LandArgs):
        return [(LANDS_TRAILER, args.lands), (LANE_COMMIT_TRAILER, args.commit)]
    return []


def _plan_land(ctx: Context, args: LandArgs, base: GitTree, *, limits: Limits | None) -> TreePlan:
    """The lane call's change on the target's tree ``base``: its own patch through the same
    engine (the same matching and ambiguity rules) where the ledger recorded it; else (a revert
    made on the lane, or a call this ledger never saw) the lane commit's diff, merged three-way."""
    store = ctx.store
    # The recorded patch first: it needs no lane commit here, which a clone that never fetched
    # the lane (one recovering a landing another clone's queue left) does not hold.
    patch_args = lane_call_args(ctx, args.lands, args.lane)
    if patch_args is not None:
        return plan(patch_args.patch(), base, limits=limits)
    if not store.has_object(args.commit):
        raise LandConflictError(
            f"lane call {args.lands[:12]}'s commit {args.commit[:12]} is not in the repository",
            hint="fetch the lane first",
        )
    parent = store.parent_of(args.commit)
    changes = [
        CommitChange(c.status, c.path, c.old_path) for c in store.changes_in(parent, args.commit)
    ]
    return plan_pick(
        changes,
        before=store.tree_at(parent),
        after=store.tree_at(args.commit),
        tip=base,
        merge=lambda path, a, o, t: merge_blobs(store, path, a, o, t),
    )


def _plan_revert(
    ctx: Context, args: RevertArgs, base_commit: str | None, base: GitTree
) -> TreePlan:
    store = ctx.store
    if not store.has_object(args.commit):
        raise RevertedCommitGoneError(
            f"call {args.reverts[:12]}'s commit {args.commit[:12]} is not in the repository"
        )
    parent = store.parent_of(args.commit)
    changes = [
        CommitChange(c.status, c.path, c.old_path) for c in store.changes_in(parent, args.commit)
    ]
    try:
        return plan_revert(
            changes,
            before=store.tree_at(parent),
            after=store.tree_at(args.commit),
            tip=base,
            merge=lambda path, a, o, t: merge_blobs(store, path, a, o, t),
        )
    except RevertConflictError as exc:
        paths = set(exc.details.get("paths", ()))
        later = commits_changing(store, base_commit, args.commit, paths)
        named = ", ".join(f"{commit[:12]} ({subject[:50]})" for commit, subject in later)
        raise RevertConflictError(
            f"cannot revert call {args.reverts[:12]}: {exc.message}"
            + (f" (commits to it since {args.commit[:12]}: {named})" if named else ""),
            paths=sorted(paths),
            commits=[commit for commit, _ in later],
        ) from None
