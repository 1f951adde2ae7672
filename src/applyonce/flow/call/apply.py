"""One call, from patch text to one published commit (docs/design.md §1): the corridor.

    parse → identify → claim → known outcome? → prepare
          → stage → approve → check → commit object → publish (CAS)   (restaged if the tip moved)
          → settle (receipt, ledger) → sync the checkouts

Git is the source of truth for *what* happened; receipts and the ledger record *why*. The only step
that makes a call take effect is ``publish``; everything before it can be thrown away, everything
after it is bookkeeping that ``recover`` can finish from Git.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import re
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from applyonce.core.identity import ApplyPatchArgs, CallIdentity, patch_source, sha256_hex
from applyonce.core.land import LANE_PREFIX
from applyonce.core.message import build_message
from applyonce.core.plan import TreePlan, check_parents, plan
from applyonce.core.receipt import (
    CheckRecord,
    Receipt,
    ReceiptError,
    parse_receipt,
    records_of_plan,
)
from applyonce.errors import ApplyOnceError, ConflictError, StateError, UsageError
from applyonce.faults import fault
from applyonce.flow.call.approval import approval_gate
from applyonce.flow.call.checks import run_checks
from applyonce.flow.call.config import with_config
from applyonce.flow.call.hooks import run_hooks
from applyonce.flow.call.limits import check_write_bound, read_limits
from applyonce.flow.call.policy import commit_policy
from applyonce.flow.checkouts.dirty import Snapshot, take_dirty
from applyonce.flow.checkouts.lag import shown_for_call
from applyonce.flow.checkouts.sync import Held, behind_of, catch_up, publishing, sync_after_publish
from applyonce.flow.context import Context
from applyonce.flow.options import CallOptions, CallOutcome, PlanView, with_mail
from applyonce.flow.record import settle
from applyonce.flow.record.adopt import ForgedCallIdError, adopt_commit, confirm_adopted
from applyonce.flow.record.changes import CallArgs, extra_trailers, plan_call, touched_paths
from applyonce.flow.record.leases import Lessee, lease_length
from applyonce.flow.record.verify import (
    UnknownOutcomeError,
    check_same_args,
    check_still_on_branch,
    stored_receipt,
    verify_against_git,
)
from applyonce.flow.repeat import reevaluates, replay_note
from applyonce.flow.state_guard import refuse_state_paths
from applyonce.git.checkouts import SyncReport
from applyonce.git.history import REMOTE_INCOMPLETE_HINT, require_complete
from applyonce.git.publisher import CallOnBranchError, PublishUnknownError, TipMovedError
from applyonce.git.store import GitTree
from applyonce.patch import parse
from applyonce.state.ledger import CallBusyError, Claim, Event, EventKind
from applyonce.state.storage import LedgerUnavailableError, StorageError

MAX_RESTAGES = 32
RESTAGE_WAIT_CAP_S = 0.5  # the longest random wait before a restage
RESTAGE_BUDGET_S = 60.0  # restaging goes on past MAX_RESTAGES for this long
# After this many lost races in a row, a call restages with its checkouts held (their
# index.lock, flow.sync.publishing): a user's 'git commit' moves the tip while the call waits for
# that lock, and would again during every restage made without it; held, nothing that takes the
# lock can move the tip, and the next publish goes through. Not from the first loss: the restage
# runs the checks again, and the user's git cannot take the lock as long as they run.
HOLD_AFTER_LOSSES = 2
_TOOL_CALL_ID = re.compile(r"^[\x21-\x7e]{1,200}$")
# Calls being applied in this process right now (any thread). One call runs at most once at a time
# per process, so a ledger claim this process holds for a call not in here was left by an apply
# that failed halfway, and may be taken over.
_RUNNING: set[str] = set()
_RUNNING_LOCK = threading.Lock()


class UnrecordedCommitError(StateError):
    """The commit is on the branch, but its receipt or ledger entry could not be written."""

    kind = "unrecorded-commit"
    default_hint = (
        "the patch is applied (do not send it as a new call); make the state directory"
        " writable, then run 'applyonce recover' to finish its record"
    )


_UNRECORDED_IN_DATABASE = (
    "the patch is applied (do not send it as a new call); start the ledger's database, then run"
    " 'applyonce recover' to finish its record"
)


class BaseMovedError(ConflictError):
    kind = "base-moved"
    default_hint = "re-read the files and send a patch for the branch's new state"


@contextlib.contextmanager
def _running(call_id: str) -> Iterator[None]:
    with _RUNNING_LOCK:
        if call_id in _RUNNING:
            raise CallBusyError(
                f"call {call_id[:12]} is running in this process", call_id=call_id, pid=os.getpid()
            )
        _RUNNING.add(call_id)
    try:
        yield
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(call_id)


# --- identify and plan (pure reads: nothing is written) ------------------------------------------


def _lane_of_unborn(ctx: Context, ref: str) -> bool:
    """Whether ``ref`` is a lane whose branch HEAD points at is unborn too: the lane starts
    empty (:func:`applyonce.flow.call.land.open_lane`), its first call the root commit."""
    if not ref.startswith("refs/heads/" + LANE_PREFIX):
        return False
    try:
        head = ctx.store.resolve_branch(None)
    except UsageError:  # HEAD is detached
        return False
    return ctx.publisher.tip(head) is None


def identify(
    ctx: Context, patch_text: str, options: CallOptions
) -> tuple[ApplyPatchArgs, CallIdentity]:
    """Parse ``patch_text`` and compute the call's normalised args and identity.

    Raises:
        ApplyOnceError: the patch or the options are bad (nothing is written).
    """
    if options.tool_call_id is not None and not _TOOL_CALL_ID.match(options.tool_call_id):
        raise UsageError("the tool call ID must be 1-200 printable ASCII characters without spaces")
    limits = read_limits(ctx)
    patch = parse(patch_text, options.format, limits=limits)
    ref = ctx.store.resolve_branch(options.branch)
    ctx.require_remote_branch(ref)
    if (
        options.branch is not None
        and ctx.publisher.tip(ref) is None
        and not ctx.store.head_is(ref)
        and not _lane_of_unborn(ctx, ref)
    ):
        raise UsageError(
            f"there is no branch {options.branch!r}",
            hint="pass an existing --branch, or create it first with 'git branch NAME'",
        )
    check_write_bound(ctx, patch, ref, limits)
    args = ApplyPatchArgs.from_patch(patch, ref=ref, repo_root=ctx.repo_root)
    ident = CallIdentity.compute(
        args.sha256(),
        contract_sha256=options.contract_sha256,
        attempt=options.attempt,
        idempotency_key=options.idempotency_key,
    )
    return args, ident


def dry_run(ctx: Context, patch_text: str, options: CallOptions) -> PlanView:
    """What ``apply`` would do on the current tip. Writes nothing at all. With ``--dirty
    commit``, it names the touched paths whose uncommitted changes the call would commit
    first (its plan is still made on the tip's versions of them)."""
    args, ident = identify(ctx, patch_text, options)
    options = with_mail(with_config(ctx, options), patch_text)  # a series is refused here too
    base = ctx.publisher.tip(args.ref)
    touched = args.patch().touched_paths()
    refuse_state_paths(ctx.store, ctx.state_dir, touched)
    base_tree = ctx.store.tree_at(base)
    tree_plan = plan(args.patch(), base_tree, limits=read_limits(ctx))
    snapshot: tuple[str, ...] = ()
    if options.dirty == "commit":
        shown = shown_for_call(ctx, args.ref, base, ask_ledger=False)
        snapshot = tuple(
            ctx.checkouts.dirty_paths(args.ref, base_tree, touched, base_commit=base, shown=shown)
        )
    return PlanView(ident.call_id, args.ref, base, tree_plan, snapshot)


# --- the call ------------------------------------------------------------------------------------


def apply(ctx: Context, patch_text: str, options: CallOptions) -> CallOutcome:
    """Apply ``patch_text`` exactly once.

    A call that already finished returns its stored receipt and nothing runs. A rejection is a
    receipt too (``status == "rejected"``); only failures that leave no receipt raise.

    Raises:
        ApplyOnceError: bad input (nothing written), a conflict, or untrustworthy state.
    """
    lease = lease_length(ctx, options.lease_seconds)
    options = with_mail(with_config(ctx, options), patch_text)
    args, ident = identify(ctx, patch_text, options)
    return run_call(ctx, args, ident, patch_source(patch_text, options.format), options, lease)


def run_call(
    ctx: Context,
    args: CallArgs,
    ident: CallIdentity,
    source: dict[str, str],
    options: CallOptions,
    lease: float,
) -> CallOutcome:
    """Run the identified call exactly once (a patch, or a revert:
    :mod:`applyonce.flow.call.revert`): its known outcome if it has one, else claim, stage, check,
    publish and settle it."""
    with _running(ident.call_id), Lessee(ctx, ident.call_id, lease) as lessee:
        try:
            known = _known_outcome(ctx, args, ident, source, lessee)
            if isinstance(known, CallOutcome):
                return known
            return _run(ctx, args, ident, known.execution_id, options)
        finally:
            # Published or abandoned, the call's objects are no longer kept from git's
            # housekeeping (a killed call's .keep files are removed by recover).
            ctx.store.written.end()


def _known_outcome(
    ctx: Context, args: CallArgs, ident: CallIdentity, source: dict[str, str], lessee: Lessee
) -> CallOutcome | Claim:
    """Claim the call; if it has an outcome already — recorded, or in Git — that outcome.
    Otherwise the claim under which it runs now (kept renewed by ``lessee``'s heartbeat)."""
    if ctx.receipts.read_bytes(ident.call_id) is None:
        # A new call's hostile paths are refused before any state exists (the tip's tree tells
        # symlinked parents). A known call is not re-judged: it replays what it was. So is a
        # history too short to show the call has not landed already (a shallow clone): the
        # search for its Call-Id would refuse it after the claim.
        tip = ctx.publisher.tip(args.ref)
        hint = REMOTE_INCOMPLETE_HINT if ctx.remote is not None else None
        require_complete(ctx.store, args.ref, tip, hint=hint)
        tip_tree = ctx.store.tree_at(tip)
        touched = touched_paths(ctx, args)
        for path in touched:
            check_parents(tip_tree, path)
        refuse_state_paths(ctx.store, ctx.state_dir, touched)
    owner, lease = lessee.owner, lessee.seconds
    claim = ctx.ledger.claim(
        ident, ref=args.ref, owner=owner, lease_seconds=lease, args=args, source=source
    )
    if claim.outcome in ("run", "takeover"):
        lessee.claimed()
    fault("after-claim")
    if claim.outcome == "replay":
        reopened = _finished(ctx, args, ident, claim, lessee)
        if isinstance(reopened, CallOutcome):
            return reopened
        claim = reopened
    if claim.outcome == "unknown":
        raise _unknown(ctx, ident)
    if claim.outcome == "takeover":
        # Its last process died mid-call: Git says whether it took effect; never run it twice.
        assert claim.row is not None
        ctx.receipts.remove_stale_temps(ident.call_id)
        # Imported here: only a call that takes over a dead one's loads recovery.
        from applyonce.flow.recovery.recover import reconcile

        outcome = reconcile(ctx, claim.row, already_claimed=claim.execution_id, args=args)
        assert outcome is not None
        if outcome.now == "committed":
            return _landed(ctx, stored_receipt(ctx, ident.call_id), replayed=True)
        if outcome.now == "unknown":
            raise _unknown(ctx, ident)
        claim = ctx.ledger.claim(ident, ref=args.ref, owner=owner, lease_seconds=lease, args=args)
    # Whatever the record says, Git has the last word before anything runs.
    found = _find_published(ctx, claim, args, ident)
    if found is not None:
        return _landed(ctx, found, replayed=True)
    return claim


def _finished(
    ctx: Context, args: CallArgs, ident: CallIdentity, claim: Claim, lessee: Lessee
) -> CallOutcome | Claim:
    """A finished call: its stored result, or, for a rejection that depends on the repository
    on a tip other than the one it was rejected at (:func:`reevaluates`), the claim under which
    it runs again. Of several processes reopening it, one runs; the others claim it as usual
    (it is busy, or they return what that run stored)."""
    receipt = stored_receipt(ctx, ident.call_id)
    tip = ctx.publisher.tip(args.ref)
    if reevaluates(receipt, tip):
        reopened = ctx.ledger.reopen(
            ident.call_id,
            owner=lessee.owner,
            rejected=claim.execution_id,
            lease_seconds=lessee.seconds,
            data={
                "kind": (receipt.error or {}).get("kind"),
                "rejected_at": receipt.base_commit,
                "tip": tip,
            },
        )
        if reopened is None:
            claim = ctx.ledger.claim(
                ident, ref=args.ref, owner=lessee.owner, lease_seconds=lessee.seconds, args=args
            )
            if claim.outcome != "replay":
                if claim.outcome in ("run", "takeover"):
                    lessee.claimed()
                return claim
            receipt = stored_receipt(ctx, ident.call_id)
        else:
            lessee.claimed()
            return reopened
    check_still_on_branch(ctx, receipt)
    confirm_adopted(ctx, receipt, args)
    reports: list[SyncReport] = []
    if receipt.status == "committed":
        # Its sync recorded as done or not, this clone's checkouts are judged by what they show
        # (a ledger the clones share records another clone's sync as well): brought up to the
        # branch, as before a new call, or said to be behind.
        unsynced = claim.row is not None and not claim.row.synced
        reports = sync_after_publish(ctx, receipt, record=unsynced)
    return CallOutcome(
        receipt,
        tuple(reports),
        replayed=True,
        replay=replay_note(ctx, receipt),
        behind=tuple(behind_of(ctx, receipt.ref, reports)),
    )


def _landed(
    ctx: Context, receipt: Receipt, *, replayed: bool, held: Held | None = None
) -> CallOutcome:
    reports = tuple(sync_after_publish(ctx, receipt, held=held))
    note = replay_note(ctx, receipt) if replayed else None
    behind = tuple(behind_of(ctx, receipt.ref, reports))
    return CallOutcome(receipt, reports, replayed=replayed, replay=note, behind=behind)


def _unknown(ctx: Context, ident: CallIdentity) -> UnknownOutcomeError:
    """The error of a call recorded as unknown, with the reason its receipt gives."""
    error: dict[str, Any] = {}
    with contextlib.suppress(ReceiptError):
        receipt = ctx.receipts.load(ident.call_id)
        error = receipt.error or {} if receipt is not None else {}
    reason = f": {error['message']}" if error.get("message") else ""
    message = f"call {ident.call_id[:12]}'s outcome is unknown{reason}"
    if error.get("kind") == ForgedCallIdError.kind:
        return ForgedCallIdError(message, call_id=ident.call_id)
    # Recorded already: what is left is a person's decision.
    hint = settle.unknown_hint(ident.call_id, error)
    return UnknownOutcomeError(message, call_id=ident.call_id, hint=hint)


def _find_published(
    ctx: Context, claim: Claim, args: CallArgs, ident: CallIdentity
) -> Receipt | None:
    """Before running, make sure this call has not already taken effect.

    A claim taken over from a dead process, a receipt that outlived a lost ledger, or a lost
    state directory: in each case Git is asked whether a commit carries this Call-Id.
    """
    receipt: Receipt | None = None
    data = ctx.receipts.read_bytes(ident.call_id)
    if data is not None:
        with contextlib.suppress(ReceiptError):
            receipt = parse_receipt(data, call_id=ident.call_id)
    if data is not None and receipt is not None and receipt.status == "committed":
        verify_against_git(ctx, receipt)
        check_same_args(ctx, ident, receipt.commit)
        check_still_on_branch(ctx, receipt)
        confirm_adopted(ctx, receipt, args)
        settle.record_settled(ctx, receipt, EventKind.RECONCILED, sha256=sha256_hex(data))
        return receipt
    ref = args.ref
    # A call this ledger never saw run (a fresh claim, not one taken over from a process that
    # died) was published by no writer that shares the ledger: a remote's branch fetched a
    # moment ago (for the tip this call checked its paths on, or by the call before it in a
    # group) shows as much as one fetched now. A writer with a ledger of its own may publish
    # it at any moment, fetch or not: the server's hook refuses that second push.
    commits = ctx.publisher.landed(ref, ident.call_id, recent=claim.outcome == "run")
    if not commits:
        return None
    if len(commits) > 1:
        raise UnknownOutcomeError(
            f"{len(commits)} commits carry call {ident.call_id[:12]}",
            call_id=ident.call_id,
            hint="run 'applyonce recover' to record it; then "
            + settle.duplicate_hint(ident.call_id, commits),
        )
    check_same_args(ctx, ident, commits[0])
    return adopt_commit(ctx, ident, claim.execution_id, ref, commits[0], receipt, args=args)


def _run(
    ctx: Context, args: CallArgs, ident: CallIdentity, execution_id: str, options: CallOptions
) -> CallOutcome:
    """Prepare, then stage, check and publish (restaged while the tip moves), then settle."""
    ref = args.ref
    base = ctx.publisher.tip(ref)
    prepared = settle.prepare(
        ctx,
        ident,
        execution_id,
        ref=ref,
        base=base,
        tool_call_id=options.tool_call_id,
        no_verify=options.no_verify,
    )
    fault("after-prepared")
    # The checkouts, held from just before the publish until the sync has written their indexes
    # (:func:`publishing`); released at once if the tip moved, or the call is rejected.
    with contextlib.ExitStack() as hold:
        return _stage_and_publish(ctx, args, ident, execution_id, options, prepared, base, hold)


def _stage_and_publish(
    ctx: Context,
    args: CallArgs,
    ident: CallIdentity,
    execution_id: str,
    options: CallOptions,
    prepared: Receipt,
    base: str | None,
    hold: contextlib.ExitStack,
) -> CallOutcome:
    """:func:`_run` once the call is prepared on ``base``: stage, check, publish (the checkouts
    held in ``hold`` across it), settle, sync."""
    ref = args.ref
    checks: list[CheckRecord] = []
    snap: Snapshot | None = None
    try:
        # The checkout catches up with its branch first (and, with a remote as the commit point,
        # with other clones' calls): it then shows what the call is staged on, and no file of
        # the branch's own is taken for the user's edit. What it cannot bring up is judged by
        # what it shows (a sync that cannot run is no error: it is said after the publish).
        with contextlib.suppress(OSError):
            catch_up(ctx, ref, base)
        base_tree = ctx.store.tree_at(base)
        dirty_mode = options.dirty or "refuse"
        touched = touched_paths(ctx, args)
        snap = take_dirty(
            ctx,
            ident,
            ref,
            base,
            base_tree,
            touched,
            dirty_mode,
            shown_for_call(ctx, ref, base),
        )
        approved = False
        limits = read_limits(ctx)
        policy = commit_policy(ctx, options, options.trailers)
        holding, held = False, None
        # Bounded by count and time: at least MAX_RESTAGES, more while RESTAGE_BUDGET_S lasts (a
        # branch many clones share takes a loser many turns; each restage is a fresh chance).
        budget = time.monotonic() + RESTAGE_BUDGET_S
        for attempt in itertools.count():
            if attempt >= MAX_RESTAGES and time.monotonic() > budget:
                raise BaseMovedError(
                    f"{ref} kept moving; gave up after {attempt} restages",
                    retryable=True,
                    hint="other writers kept the branch busy; repeat the call (it runs again)",
                )
            # With a snapshot of the user's changes, the call is staged on it (its parent).
            parent, parent_tree = (snap.commit, snap.tree) if snap else (base, base_tree)
            try:
                tree_plan = plan_call(ctx, args, parent, parent_tree, limits=limits)
            except ApplyOnceError as exc:
                if attempt == 0:
                    raise
                raise BaseMovedError(
                    f"{ref} moved and the patch no longer applies ({exc.message})",
                    cause=exc.to_dict(),
                ) from None
            tree_id, blobs = ctx.store.write_tree(parent_tree, tree_plan, fresh=snap is None)
            _record(ctx, ident, execution_id, EventKind.STAGED, {"base": base, "tree": tree_id})
            fault("after-stage")
            if not approved:
                approval_gate(
                    ctx, PlanView(ident.call_id, ref, parent, tree_plan), execution_id, options
                )
                approved = True
            checks = run_checks(ctx, tree_plan, parent_tree, tree_id, options)
            names = {"checks": [c.name for c in checks], "skipped": [*(options.skip_checks or ())]}
            _record(ctx, ident, execution_id, EventKind.CHECKED, names)
            fault("after-check")
            message = build_message(
                tree_plan,
                ident,
                tool_call_id=options.tool_call_id,
                extra=extra_trailers(args),
                message=options.message,
                trailers=policy.trailers,
            )
            message, hooked = run_hooks(ctx, ref, parent, tree_id, message, options, checks)
            checks = [*checks, *hooked]
            fault("after-hooks")
            commit_id = ctx.store.create_commit(
                tree_id, parent, message, policy.author, sign=policy.sign
            )
            _record(
                ctx,
                ident,
                execution_id,
                EventKind.COMMIT_OBJECT,
                {
                    "commit": commit_id,
                    "base": base,
                    **({"snapshot": parent} if snap else {}),
                    # Its commit point: recover rolls it forward there only.
                    **({"remote": ctx.remote} if ctx.remote else {}),
                },
            )
            fault("after-commit-object")
            if not holding:
                held = hold.enter_context(publishing(ctx, ref, touched))
                holding = True
            try:
                ctx.publisher.publish(ref, base, commit_id, reason=f"applyonce: {ident.call_id}")
                break
            except CallOnBranchError as already:
                # The server's hook (applyonce hook pre-receive): a commit on the branch carries
                # this call already, landed by a clone whose push this one's view missed. That
                # commit is the call's result, never a second one.
                if already.call_id != ident.call_id:
                    raise
                hold.close()  # their indexes untouched: the other clone's push syncs them
                landed = adopt_commit(
                    ctx, ident, execution_id, ref, already.commit, prepared, args=args
                )
                return _landed(ctx, landed, replayed=True)
            except TipMovedError as moved:
                # Whoever moved the tip may have been this very call (another execution of it,
                # wrongly judged dead): then it has landed, and must not land twice.
                own = ctx.publisher.landed(ref, ident.call_id, since=base)
                if own:
                    hold.close()  # their indexes untouched: that execution syncs them
                    landed = adopt_commit(
                        ctx, ident, execution_id, ref, own[0], prepared, args=args
                    )
                    return _landed(ctx, landed, replayed=False)
                if attempt + 1 < HOLD_AFTER_LOSSES:
                    # Their indexes untouched; held again before the next publish.
                    hold.close()
                    holding, held = False, None
                moved_from, base = base, moved.actual
                base_tree = ctx.store.tree_at(base)
                if snap is not None:
                    snap = _snapshot_again(ctx, ident, ref, snap, moved_from, base, base_tree)
                if held is None:
                    # Writers that lost a race at once would race again in step (a remote's
                    # winner does not even fetch before its next call): a random wait, growing
                    # with the losses, lets each one's turn come. (Not while the checkouts are
                    # held: no other call of this repository can publish meanwhile.)
                    time.sleep(
                        random.uniform(0.0, min(RESTAGE_WAIT_CAP_S, 0.01 * 2 ** min(attempt, 8)))
                    )
    except (ForgedCallIdError, PublishUnknownError):
        # Recorded unknown, or in flight until recover learns if the remote took it: neither
        # is a rejection.
        raise
    except LedgerUnavailableError:
        # The ledger's server is gone: like a crash, the call stays in flight there (its
        # receipt says prepared), and the next claim settles it through Git.
        raise
    except ApplyOnceError as exc:
        hold.close()  # their indexes untouched
        if snap is not None:
            # Decided on the user's uncommitted files, not on the tip: once they change the
            # call may apply, on the same tip too, so the rejection is never pinned.
            exc.retryable = True
        # Rejected at the tip it was last staged on: a repeat judges it again only elsewhere.
        judged = prepared.model_copy(update={"base_commit": base})
        return CallOutcome(settle.reject(ctx, judged, exc, checks))
    fault("after-publish")
    try:
        committed = _settle_published(ctx, prepared, tree_plan, blobs, parent, commit_id, checks)
    except StorageError as exc:
        # Exit 5 until recorded: never "rejected" for a change that landed, and no "committed"
        # without its receipt. Repeating the call, or 'applyonce recover', finds the commit.
        raise UnrecordedCommitError(
            f"commit {commit_id[:12]} is on {ref}, but its record could not be written"
            f" ({exc.message})",
            hint=_UNRECORDED_IN_DATABASE if isinstance(exc, LedgerUnavailableError) else None,
            call_id=ident.call_id,
            commit=commit_id,
        ) from None
    outcome = _landed(ctx, committed, replayed=False, held=held)
    hold.close()
    fault("after-sync")
    return outcome


def _snapshot_again(
    ctx: Context,
    ident: CallIdentity,
    ref: str,
    snap: Snapshot,
    old_base: str | None,
    base: str | None,
    base_tree: GitTree,
) -> Snapshot | None:
    """The snapshot of the user's changes, made again on the branch's new tip; refused if the
    tip changed a snapshotted path (the user's version was made on the old one).

    Raises:
        BaseMovedError: another commit changed a path the user has changes on.
    """
    if old_base is not None and base is not None:
        # Only the snapshotted paths are compared (not a diff of the two trees).
        old_tree = ctx.store.tree_at(old_base)
        changed = {p for p in snap.paths if old_tree.version(p) != base_tree.version(p)}
    else:
        changed = set(snap.paths)
    if changed:
        raise BaseMovedError(
            f"{ref} moved and changed {', '.join(sorted(changed)[:3])}, where you have"
            " uncommitted changes"
        )
    shown = shown_for_call(ctx, ref, base)
    return take_dirty(ctx, ident, ref, base, base_tree, snap.paths, "commit", shown)


def _settle_published(
    ctx: Context,
    prepared: Receipt,
    tree_plan: TreePlan,
    blobs: dict[str, str],
    base: str | None,
    commit_id: str,
    checks: list[CheckRecord],
) -> Receipt:
    files, levels = records_of_plan(tree_plan, blobs)
    return settle.commit(
        ctx,
        prepared,
        base=base,
        commit_id=commit_id,
        files=files,
        match_levels=levels,
        checks=checks,
    )


def _record(
    ctx: Context, ident: CallIdentity, execution_id: str, kind: EventKind, data: Mapping[str, Any]
) -> None:
    ctx.ledger.record(Event(ident.call_id, execution_id, kind, data=data))
