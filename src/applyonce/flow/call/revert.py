"""Undo (``applyonce revert CALL_ID``, MCP ``revert_patch``): one commit that reverts a call's
commit, itself a call run exactly once through the corridor of :mod:`applyonce.flow.call.apply`.

Its identity is the reverted call's (``RevertArgs``: the call ID, its commit and the branch) with
its own attempt, never the change it computes: repeating the revert replays its stored result,
and a crash anywhere is recovered through its ``Call-Id`` like any call's. What it changes is
planned by :func:`applyonce.core.revert.plan_revert` on the tip (restaged if the tip moves).
"""

from __future__ import annotations

from applyonce.core.identity import CallIdentity
from applyonce.core.revert import REVERT_TOOL, REVERT_TOOL_VERSION, RevertArgs
from applyonce.errors import UsageError
from applyonce.flow.call.apply import run_call
from applyonce.flow.call.config import with_config
from applyonce.flow.context import Context
from applyonce.flow.options import CallOptions, CallOutcome, PlanView
from applyonce.flow.record.changes import plan_call
from applyonce.flow.record.leases import lease_length
from applyonce.flow.record.verify import stored_receipt


def identify_revert(
    ctx: Context, call_id: str, options: CallOptions
) -> tuple[RevertArgs, CallIdentity]:
    """The args and identity of the call that reverts ``call_id`` (a full call ID).

    Raises:
        UsageError: the call did not commit, or the branch does not exist (nothing is written).
        ReceiptError: its receipt is missing or does not verify.
    """
    reverted = stored_receipt(ctx, call_id)
    short = call_id[:12]
    if reverted.status != "committed" or reverted.commit is None:
        hint = {
            "prepared": "run 'applyonce recover' first; revert it if it then is committed",
            "unknown": "settle it with 'applyonce resolve' first",
        }.get(reverted.status, "it changed nothing, so there is nothing to undo")
        raise UsageError(
            f"call {short} is {reverted.status}; only a committed call can be reverted", hint=hint
        )
    ref = reverted.ref if options.branch is None else ctx.store.resolve_branch(options.branch)
    ctx.require_remote_branch(ref)
    if options.branch is not None and ctx.publisher.tip(ref) is None:
        raise UsageError(
            f"there is no branch {options.branch!r}",
            hint="pass an existing --branch, or leave it out to revert on the call's branch",
        )
    args = RevertArgs(ref=ref, reverts=call_id, commit=reverted.commit)
    # Not the contract: undoing a call is the same act whoever asks (the CLI, or an MCP server
    # run with --contract), so both find the one revert.
    ident = CallIdentity.compute(
        args.sha256(),
        attempt=options.attempt,
        tool=REVERT_TOOL,
        tool_version=REVERT_TOOL_VERSION,
    )
    return args, ident


def revert(ctx: Context, call_id: str, options: CallOptions) -> CallOutcome:
    """Revert the commit of ``call_id`` exactly once, as one commit on its branch.

    A revert that already finished returns its stored receipt and nothing runs. One refused
    because later commits changed the same lines is a rejected receipt (exit 4, retryable).

    Raises:
        UsageError: the call did not commit, or its commit is not on the branch (nothing written).
        ApplyOnceError: as :func:`applyonce.flow.call.apply.apply`.
    """
    lease = lease_length(ctx, options.lease_seconds)
    options = with_config(ctx, options)  # applyonce.check, .skipCheck, .dirty, as for a patch
    args, ident = identify_revert(ctx, call_id, options)
    if ctx.receipts.read_bytes(ident.call_id) is None:
        _check_on_branch(ctx, args)
    source = {"reverts": call_id, "format": REVERT_TOOL}
    return run_call(ctx, args, ident, source, options, lease)


def dry_run_revert(ctx: Context, call_id: str, options: CallOptions) -> PlanView:
    """What ``revert`` would do on the current tip. Writes nothing at all."""
    args, ident = identify_revert(ctx, call_id, options)
    _check_on_branch(ctx, args)
    base = ctx.publisher.tip(args.ref)
    tree_plan = plan_call(ctx, args, base, ctx.store.tree_at(base))
    return PlanView(ident.call_id, args.ref, base, tree_plan)


def _check_on_branch(ctx: Context, args: RevertArgs) -> None:
    if not ctx.publisher.is_on(args.ref, args.commit):
        raise UsageError(
            f"call {args.reverts[:12]}'s commit {args.commit[:12]} is not on {args.ref}",
            hint="there is nothing of it to undo there (if the branch was reset on purpose, "
            "record that with 'applyonce resolve CALL_ID --as rewritten --note TEXT')",
        )
