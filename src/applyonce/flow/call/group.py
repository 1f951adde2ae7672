"""Group commit (docs/design.md §1, "Groups"): calls that arrive together on one branch are
published together.

Each call is still its own commit, with its own ``Call-Id`` trailer and its own receipt; the
commits are chained (call k's commit has call k-1's as parent), and the group pays once for what a
call pays alone:

* its ``prepared`` receipts are fsynced each and their directory once, then their events are one
  ledger transaction (the group's durable pending flush);
* its objects reach the disk as one pack, flushed by the one compare-and-swap that moves the
  branch from the group's base to the last commit of the chain;
* its ``committed`` and ``rejected`` receipts are written as the prepared ones were, then their
  events are one ledger transaction; the checkouts are synced once.

A call whose patch does not apply on the chain, or whose check or approval refuses it, drops out
with its own rejection; the calls after it are chained without it. When the branch moved before
the publish, the whole group is staged again on the new tip, as a call alone is.

With a remote as the commit point, the group's chain is pushed once (its objects under one
pending ref, then one atomic compare-and-swap of the remote's branch naming every call of the
chain to the server's hook).

Not grouped (each runs alone, as before): a repository with commit hooks, ``--dirty commit``
(its snapshot is a commit of its own under the call), and the second call of a group with a call
ID already in it (it runs after the group, and replays).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import random
import time
from collections.abc import Callable, Sequence

from applyonce.core.identity import CallIdentity, patch_source
from applyonce.core.message import build_message
from applyonce.core.plan import TreePlan
from applyonce.core.receipt import CheckRecord, Receipt, records_of_plan
from applyonce.errors import ApplyOnceError
from applyonce.faults import fault
from applyonce.flow.call.apply import (
    HOLD_AFTER_LOSSES,
    MAX_RESTAGES,
    RESTAGE_BUDGET_S,
    RESTAGE_WAIT_CAP_S,
    BaseMovedError,
    UnrecordedCommitError,
    _known_outcome,
    _running,
    identify,
    run_call,
)
from applyonce.flow.call.apply import (
    apply as apply_alone,
)
from applyonce.flow.call.approval import approval_gate
from applyonce.flow.call.checks import run_checks
from applyonce.flow.call.config import with_config
from applyonce.flow.call.hooks import run_hooks
from applyonce.flow.call.limits import read_limits
from applyonce.flow.call.policy import commit_policy
from applyonce.flow.checkouts.dirty import take_dirty
from applyonce.flow.checkouts.lag import shown_for_call
from applyonce.flow.checkouts.sync import behind_of, catch_up, publishing, sync_many
from applyonce.flow.context import Context
from applyonce.flow.options import CallOptions, CallOutcome, PlanView, with_mail
from applyonce.flow.record import settle
from applyonce.flow.record.adopt import ForgedCallIdError, adopt_commit
from applyonce.flow.record.changes import CallArgs, extra_trailers, plan_call, touched_paths
from applyonce.flow.record.leases import Lessee, lease_length
from applyonce.git.checkouts import SyncReport
from applyonce.git.hooks import VERIFY_HOOKS, find_hooks
from applyonce.git.publisher import TipMovedError
from applyonce.patch.limits import Limits
from applyonce.state.ledger import Event, EventKind
from applyonce.state.storage import LedgerUnavailableError, StorageError

Result = CallOutcome | Exception


@dataclasses.dataclass
class Request:
    """One call handed to :func:`apply_many`: its patch text and options."""

    patch_text: str
    options: CallOptions


@dataclasses.dataclass
class Member:
    """A call of a group, from its claim to its outcome."""

    index: int
    args: CallArgs
    ident: CallIdentity
    source: dict[str, str]
    options: CallOptions
    lease: float
    stack: contextlib.ExitStack = dataclasses.field(default_factory=contextlib.ExitStack)
    execution_id: str = ""
    prepared: Receipt | None = None
    approved: bool = False
    # Its patch applied on an earlier staging of the group: if it no longer does, the branch
    # moved under it (until then, its own refusal is the truth, wherever the branch is).
    applied: bool = False
    # The last staging: its plan, blobs, parent, commit (None: it dropped out) or its refusal.
    plan: TreePlan | None = None
    blobs: dict[str, str] = dataclasses.field(default_factory=dict)
    parent: str | None = None
    commit: str | None = None
    checks: list[CheckRecord] = dataclasses.field(default_factory=list)
    error: ApplyOnceError | None = None
    # The member this one waits on (a lane's earlier call, ``land``): when that one does not
    # take effect, this one drops out too, with ``waits`` (a retryable refusal) as its error.
    after: Member | None = None
    waits: Callable[[], ApplyOnceError] | None = None


def groupable(ctx: Context, options: CallOptions) -> bool:
    """Whether a call with these (configured) options may be published in a group: not with
    commit hooks to run, not on a snapshot of the user's changes. To a remote, a group is one
    push of its chain (one pending ref, one atomic compare-and-swap)."""
    if options.dirty == "commit":
        return False
    hooks = find_hooks(ctx.store)
    if options.no_verify:
        hooks = {name: path for name, path in hooks.items() if name not in VERIFY_HOOKS}
    return not hooks


def apply_many(ctx: Context, requests: Sequence[Request]) -> list[Result]:
    """Apply each request exactly once, the calls on one branch published as a group.

    Returns each request's outcome, or the error it raised (a call's bad input, or a failure that
    leaves it in flight for ``applyonce recover``), in the order of ``requests``.
    """
    results: list[Result | None] = [None] * len(requests)
    if len(requests) == 1:
        # Alone: the call as it always ran, nothing added.
        try:
            results[0] = apply_alone(ctx, requests[0].patch_text, requests[0].options)
        except Exception as exc:  # handed to its caller's thread
            results[0] = exc
        return [r for r in results if r is not None]
    groups: dict[str, list[Member]] = {}
    alone: list[Member] = []
    seen: set[str] = set()
    for index, request in enumerate(requests):
        try:
            lease = lease_length(ctx, request.options.lease_seconds)
            options = with_mail(with_config(ctx, request.options), request.patch_text)
            args, ident = identify(ctx, request.patch_text, options)
        except Exception as exc:
            results[index] = exc
            continue
        source = patch_source(request.patch_text, options.format)
        member = Member(index, args, ident, source, options, lease)
        if ident.call_id in seen or not groupable(ctx, options):
            alone.append(member)
            continue
        seen.add(ident.call_id)
        groups.setdefault(args.ref, []).append(member)
    for members in groups.values():
        if len(members) == 1:
            alone.insert(0, members[0])
            continue
        try:
            for member, result in zip(members, _run_group(ctx, members), strict=True):
                results[member.index] = result
        except Exception as exc:  # unexpected: every call of the group is left to recover
            for member in members:
                if results[member.index] is None:
                    results[member.index] = exc
    for member in alone:
        try:
            results[member.index] = run_call(
                ctx, member.args, member.ident, member.source, member.options, member.lease
            )
        except Exception as exc:
            results[member.index] = exc
    return [r for r in results if r is not None]


def _run_group(ctx: Context, members: list[Member]) -> list[Result]:
    """Claim each member, then stage, check and publish those that run, as one group."""
    done: dict[int, Result] = {}
    live: list[Member] = []
    try:
        for member in members:
            ident = member.ident
            try:
                member.stack.enter_context(_running(ident.call_id))
                lessee = member.stack.enter_context(Lessee(ctx, ident.call_id, member.lease))
                known = _known_outcome(ctx, member.args, ident, member.source, lessee)
            except Exception as exc:
                member.stack.close()
                done[member.index] = exc
                continue
            if isinstance(known, CallOutcome):
                member.stack.close()
                done[member.index] = known
                if known.receipt.status == "committed":
                    member.commit = known.receipt.commit  # the ones waiting on it may go on
                continue
            member.execution_id = known.execution_id
            live.append(member)
        if live:
            try:
                done.update(_publish_group(ctx, live))
            except Exception as exc:  # unexpected: each call still in flight is left to recover
                for member in members:
                    done.setdefault(member.index, exc)
    finally:
        # Published or abandoned, the group's objects are no longer kept from git's housekeeping;
        # every call's claim is let go (a call adopted on the way is no longer in ``live``).
        ctx.store.written.end()
        for member in members:
            member.stack.close()
    return [done[member.index] for member in members]


def _publish_group(ctx: Context, live: list[Member]) -> dict[int, Result]:
    ref = live[0].args.ref
    base = ctx.publisher.tip(ref)
    for member in live:
        member.prepared = settle.prepared_receipt(
            ctx,
            member.ident,
            member.execution_id,
            ref=ref,
            base=base,
            tool_call_id=member.options.tool_call_id,
            no_verify=member.options.no_verify,
        )
    settle.prepare_many(ctx, [m.prepared for m in live if m.prepared is not None])
    fault("after-prepared")
    done: dict[int, Result] = {}
    with contextlib.ExitStack() as hold:
        with contextlib.suppress(OSError):
            catch_up(ctx, ref, base)
        limits = read_limits(ctx)
        holding, held = False, None
        budget = time.monotonic() + RESTAGE_BUDGET_S
        for attempt in itertools.count():
            if attempt >= MAX_RESTAGES and time.monotonic() > budget:
                gave_up = BaseMovedError(
                    f"{ref} kept moving; gave up after {attempt} restages",
                    retryable=True,
                    hint="other writers kept the branch busy; repeat the call (it runs again)",
                )
                for member in live:
                    # Judged at the tip it gave up on: the chain it was staged on last is no
                    # branch's.
                    member.commit, member.error, member.parent = None, gave_up, base
                break
            tip = _stage_chain(ctx, ref, base, live, limits)
            if tip is None:
                break  # every call dropped out: nothing to publish
            if not holding:
                touched = sorted({p for m in live if m.commit for p in touched_paths(ctx, m.args)})
                held = hold.enter_context(publishing(ctx, ref, touched))
                holding = True
            try:
                ids = [m.ident.call_id for m in live if m.commit]
                reason = f"applyonce: {len(ids)} calls, {ids[0][:12]}..{ids[-1][:12]}"
                ctx.publisher.publish(ref, base, tip, reason=reason)
                break
            except TipMovedError as moved:
                # A call whose other execution landed meanwhile (wrongly judged dead) is adopted,
                # never published twice; the others are staged again on the new tip.
                for member in list(live):
                    own = ctx.publisher.landed(ref, member.ident.call_id, since=base)
                    if own:
                        assert member.prepared is not None
                        landed = adopt_commit(
                            ctx,
                            member.ident,
                            member.execution_id,
                            ref,
                            own[0],
                            member.prepared,
                            args=member.args,
                        )
                        done[member.index] = CallOutcome(landed)
                        live.remove(member)
                if attempt + 1 < HOLD_AFTER_LOSSES:
                    hold.close()
                    holding, held = False, None
                base = moved.actual
                if held is None:
                    time.sleep(
                        random.uniform(0.0, min(RESTAGE_WAIT_CAP_S, 0.01 * 2 ** min(attempt, 8)))
                    )
                if not live:
                    return done
        published = [m for m in live if m.commit is not None]
        if published:
            fault("after-publish")
        settled: list[Receipt] = []
        for member in live:
            assert member.prepared is not None
            if member.commit is not None and member.plan is not None:
                files, levels = records_of_plan(member.plan, member.blobs)
                settled.append(
                    settle.committed_receipt(
                        ctx,
                        member.prepared,
                        base=member.parent,
                        commit_id=member.commit,
                        files=files,
                        match_levels=levels,
                        checks=member.checks,
                    )
                )
            else:
                assert member.error is not None
                judged = member.prepared.model_copy(update={"base_commit": member.parent})
                settled.append(settle.rejected_receipt(judged, member.error, member.checks))
        try:
            settle.settle_many(ctx, settled)
        except StorageError as exc:
            for member in live:
                if member.commit is None:
                    done[member.index] = exc
                    continue
                done[member.index] = UnrecordedCommitError(
                    f"commit {member.commit[:12]} is on {ref}, but its record could not be"
                    f" written ({exc.message})",
                    call_id=member.ident.call_id,
                    commit=member.commit,
                )
            return done
        committed = [r for r in settled if r.status == "committed"]
        reports: tuple[SyncReport, ...] = ()
        if committed:
            try:
                reports = tuple(sync_many(ctx, committed, held=held))
            except (ApplyOnceError, OSError) as exc:
                reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
                reports = (SyncReport(None, (), (), failed=reason),)
        hold.close()
    behind = tuple(behind_of(ctx, ref, reports)) if reports else ()
    for member, receipt in zip(live, settled, strict=True):
        if receipt.status == "committed":
            done[member.index] = CallOutcome(receipt, reports, replayed=False, behind=behind)
        else:
            done[member.index] = CallOutcome(receipt)
    if published:
        fault("after-sync")
    return done


def _stage_chain(
    ctx: Context,
    ref: str,
    base: str | None,
    live: list[Member],
    limits: Limits,
) -> str | None:
    """Stage, check and commit each member on the one before it (the first on ``base``); a
    member refused drops out (its ``error`` set). Returns the last commit of the chain (None:
    every member dropped out)."""
    base_tree = ctx.store.tree_at(base)
    shown = shown_for_call(ctx, ref, base)
    # The user's changes on the touched paths, looked for once for the whole group; only where
    # some are found, call by call (each refused for its own paths).
    clean = True
    try:
        paths = sorted({p for member in live for p in touched_paths(ctx, member.args)})
        take_dirty(ctx, live[0].ident, ref, base, base_tree, paths, "refuse", shown)
    except ApplyOnceError:
        clean = False
    parent, parent_tree = base, base_tree
    fresh = True
    # The members' progress (staged, checked, commit object): deferred records (lost in a power
    # cut at no cost), written in one transaction once the chain is staged.
    progress: list[Event] = []
    for member in live:
        member.commit, member.error, member.checks = None, None, []
        member.parent = parent
        if member.after is not None and member.after.commit is None:
            assert member.waits is not None
            member.error = member.waits()
            continue
        ident = member.ident
        options = member.options
        try:
            touched = touched_paths(ctx, member.args)
            if not clean:
                take_dirty(ctx, ident, ref, base, base_tree, touched, "refuse", shown)
            try:
                tree_plan = plan_call(ctx, member.args, parent, parent_tree, limits=limits)
            except ApplyOnceError as exc:
                if not member.applied:
                    raise
                raise BaseMovedError(
                    f"{ref} moved and the patch no longer applies ({exc.message})",
                    cause=exc.to_dict(),
                ) from None
            member.applied = True
            tree_id, blobs = ctx.store.write_tree(parent_tree, tree_plan, fresh=fresh)
            fresh = False
            progress.append(
                Event(
                    ident.call_id,
                    member.execution_id,
                    EventKind.STAGED,
                    data={
                        "base": base,
                        "tree": tree_id,
                        **({"parent": parent} if parent != base else {}),
                    },
                )
            )
            fault("after-stage")
            if not member.approved:
                approval_gate(
                    ctx,
                    PlanView(ident.call_id, ref, parent, tree_plan),
                    member.execution_id,
                    options,
                )
                member.approved = True
            checks = run_checks(ctx, tree_plan, parent_tree, tree_id, options)
            member.checks = checks
            names = {"checks": [c.name for c in checks], "skipped": [*(options.skip_checks or ())]}
            progress.append(
                Event(ident.call_id, member.execution_id, EventKind.CHECKED, data=names)
            )
            fault("after-check")
            policy = commit_policy(ctx, options, options.trailers)
            message = build_message(
                tree_plan,
                ident,
                tool_call_id=options.tool_call_id,
                extra=extra_trailers(member.args),
                message=options.message,
                trailers=policy.trailers,
            )
            message, hooked = run_hooks(ctx, ref, parent, tree_id, message, options, checks)
            member.checks = [*checks, *hooked]
            fault("after-hooks")
            commit_id = ctx.store.create_commit(
                tree_id, parent, message, policy.author, sign=policy.sign, flush=False
            )
            # The group's base: recover rolls the chain up to this commit forward while the
            # branch is still there (the calls below it are then found on the branch).
            progress.append(
                Event(
                    ident.call_id,
                    member.execution_id,
                    EventKind.COMMIT_OBJECT,
                    data={
                        "commit": commit_id,
                        "base": base,
                        **({"parent": parent} if parent != base else {}),
                        # Its commit point: recover rolls it forward there only.
                        **({"remote": ctx.remote} if ctx.remote else {}),
                    },
                )
            )
            fault("after-commit-object")
        except (ForgedCallIdError, LedgerUnavailableError):
            raise  # not a refusal of the call: the group is left in flight, for recover
        except ApplyOnceError as exc:
            member.error = exc
            continue
        member.plan, member.blobs, member.commit = tree_plan, blobs, commit_id
        parent, parent_tree = commit_id, ctx.store.tree_at(commit_id)
    if progress:
        ctx.ledger.record(*progress)
    return parent if parent != base else None


def run_group(ctx: Context, members: list[Member]) -> list[Result]:
    """Run ``members`` — identified, configured calls on one branch, none already in a group,
    in the order their commits chain — as one group; each one's outcome or error, in order."""
    return _run_group(ctx, members)


__all__ = ["Member", "Request", "Result", "apply_many", "groupable", "run_group"]
