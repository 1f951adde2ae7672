"""Recovery (docs/design.md §6): finish every interrupted call by asking Git what happened.

For a call that is not terminal and whose owner is gone:

* a commit carrying its ``Call-Id`` on the branch after ``base_commit`` → ``committed``,
  ``reconciled: true``; receipt and ledger completed, checkout synced. The patch is never
  re-applied;
* its commit object exists (recorded by the ``commit-object`` event) but the branch was not moved,
  and the tip still equals ``base_commit`` → published now by compare-and-swap (roll forward);
* otherwise nothing took effect → ``rejected`` with ``retryable: true``: the same call may run
  again;
* contradictions (two commits with one Call-Id, or a commit that carries the Call-Id but not the
  call's change: :mod:`applyonce.flow.record.adopt`) → ``unknown``, for a person to ``resolve``;
* a history too short to show that (a shallow clone whose boundary is above the call's base, or
  a call with no base) → left in flight, with the command that deepens it: "not on the branch"
  is never concluded from a history known to be incomplete.

Committed calls without a ``synced`` event get their checkout sync; one whose checkout still does
not show its commit after it (the user's git holds ``index.lock``, a file holds the user's edits
made on the version before it) is reported as ``checkout behind`` with the command that brings
the checkout in line, and nothing is said to be settled. Then every checkout of this clone is
brought up to its branch as a call would first
(:func:`~applyonce.flow.checkouts.sync.catch_up_checkouts`), whatever the ledger records: in a
ledger that clones share, a ``synced`` event may be another clone's (its recover finished the call),
and says nothing of this clone's checkout. Records lost or tampered with are rebuilt from Git
(:mod:`applyonce.flow.recovery.repair`), and the debris of killed writers removed
(:mod:`applyonce.flow.recovery.debris`). Recovery is idempotent and safe to run concurrently with
itself and with ``apply``: each call is taken over in the ledger before it is touched.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import time
from collections.abc import Callable, Iterable

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import Receipt, ReceiptError, touched_paths_of
from applyonce.errors import ApplyOnceError
from applyonce.faults import fault
from applyonce.flow.checkouts.sync import (
    behind_of,
    catch_up_checkouts,
    publishing,
    resume_catch_up,
    sync_after_publish,
    sync_many,
)
from applyonce.flow.context import Context
from applyonce.flow.heap import without_cycle_collection
from applyonce.flow.record import settle
from applyonce.flow.record.adopt import FORGED, ForgedCallIdError, adopt_commit
from applyonce.flow.record.changes import CallArgs
from applyonce.flow.record.leases import Lessee, lease_length
from applyonce.flow.record.verify import stored_receipt
from applyonce.flow.recovery.batch import DeferredLedger
from applyonce.flow.recovery.debris import remove_dead_keeps_of, remove_debris
from applyonce.flow.recovery.repair import Walked, adopt_receipts, repair_records
from applyonce.flow.recovery.report import HELD, Outcome, RecoveryReport
from applyonce.git.history import HistoryIncompleteError
from applyonce.git.publisher import CallOnBranchError, TipMovedError
from applyonce.state.lease import DEFAULT_LEASE_S, Heartbeat, Hold, Owner, hold_of
from applyonce.state.ledger import (
    IN_FLIGHT,
    CallRow,
    EventKind,
    Ledger,
    recorded_identity,
)


class InterruptedCallError(ApplyOnceError):
    kind = "interrupted"
    default_retryable = True
    default_hint = "nothing was committed; repeat the call to run it again"


# Told each call's place before it is settled: (calls settled so far, calls to settle).
Progress = Callable[[int, int], None]


# Calls settled per ledger transaction: a thousand calls cost ten transactions, not thousands,
# and a crash in the middle leaves at most this many to settle again (the same way).
BATCH = 100


@without_cycle_collection
def recover(
    ctx: Context, *, progress: Progress | None = None, lease_seconds: float | None = None
) -> RecoveryReport:
    """Settle every interrupted call, rebuild lost records, sync what is unsynced."""
    report = RecoveryReport()
    lease = lease_length(ctx, lease_seconds)
    removed, notes = remove_debris(ctx)
    report.removed.extend(removed)
    report.notes.extend(notes)
    # With a remote: its pending pushes, fetched before any call is settled (their commit
    # objects may be the ones a call rolls forward with).
    pending_module = importlib.import_module("applyonce.flow.recovery.pending")
    pending = pending_module.fetch_pending(ctx)
    # Every row read once: the interrupted ones, and which receipts have a row at all.
    every = ctx.ledger.calls()
    in_flight = {row.call_id: row for row in every if row.state in IN_FLIGHT}
    in_flight |= adopt_receipts(ctx, report, known={row.call_id for row in every})
    walked: Walked = {}
    history = _history(ctx, in_flight.values(), report, walked)
    rows = _chain_tops_first(ctx, list(in_flight.values()), history)
    for start in range(0, len(rows), BATCH):
        batch = rows[start : start + BATCH]
        _settle_batch(ctx, batch, history, walked, lease, report, progress, start, len(rows))
    pending_module.settle_pending(ctx, pending, report)
    repair_records(ctx, report, walked)
    _sync_unsynced(ctx, report)
    _catch_up_checkouts(ctx, report)
    # Last: a killed call's pack stays kept from git's housekeeping until it is settled.
    report.removed.extend(remove_dead_keeps_of(ctx))
    return report


def _chain_tops_first(
    ctx: Context, rows: list[CallRow], history: dict[str, dict[str, list[str]]]
) -> list[CallRow]:
    """``rows``, those whose staged commit is higher in a group's chain first: rolled forward,
    the top of a chain publishes the calls below it, which are then found on the branch
    (:func:`_found_since`); the bottom first would publish itself alone, and leave the others
    interrupted. Only the calls not found on their branch are looked at."""
    depth: dict[str, int] = {}
    below: dict[str, str] = {}  # call → the staged commit under its own in the chain
    of_commit: dict[str, str] = {}  # staged commit → its call
    for row in rows:
        if history.get(row.ref, {}).get(row.call_id):
            continue
        for event in reversed(ctx.ledger.events(row.call_id)):
            if event.kind == EventKind.COMMIT_OBJECT:
                of_commit[str(event.data.get("commit"))] = row.call_id
                if event.data.get("parent"):
                    below[row.call_id] = str(event.data["parent"])
                break
    if not below:
        return rows

    def depth_of(call: str) -> int:
        if call not in depth:
            depth[call] = 0  # a cycle (a forged record) ends here
            under = of_commit.get(below.get(call, ""))
            depth[call] = 0 if under is None else 1 + depth_of(under)
        return depth[call]

    return sorted(rows, key=lambda row: -depth_of(row.call_id))


def _settle_batch(
    ctx: Context,
    rows: list[CallRow],
    history: dict[str, dict[str, list[str]]],
    walked: Walked,
    lease: float,
    report: RecoveryReport,
    progress: Progress | None,
    done: int,
    total: int,
) -> None:
    """Settle ``rows`` as :func:`reconcile` settles one call, with one transaction to take them
    all over, one heartbeat to keep their claims, and one transaction to record their events
    (each receipt is written before it: :mod:`applyonce.flow.recovery.batch`)."""
    owner = Owner.me()
    with Heartbeat(lease) as heartbeat:
        taken = ctx.ledger.take_over_many([r.call_id for r in rows], owner, lease_seconds=lease)
        if taken:
            ledger = ctx.ledger
            heartbeat.start(lambda: _renew_all(ledger, list(taken), owner, lease))
            _look_again(ctx, {row.ref for row in rows if row.call_id in taken}, history, walked)
        receipts = ctx.receipts.batch()  # one fsync of their directory, before the flush
        deferred = DeferredLedger(ctx.ledger, taken, before_flush=receipts.sync)
        batch_ctx = dataclasses.replace(ctx, _ledger=deferred, receipts=receipts)
        try:
            for i, row in enumerate(rows):
                if progress is not None:
                    progress(done + i, total)
                execution_id = taken.get(row.call_id)
                if execution_id is not None:
                    try:
                        outcome = _reconcile(batch_ctx, row, execution_id, history, None)
                    except HistoryIncompleteError as exc:
                        # A shallow clone cannot show that the call did not land: it stays in
                        # flight (never "rejected, nothing took effect"), and says how to fix it.
                        outcome = Outcome(row.call_id, row.state, row.state, exc.one_line())
                    report.outcomes.append(outcome)
                    continue
                # Held: a running call is its owner's to finish, and recover does not wait for
                # it; it says so, call by call (never "every call is settled"). One whose lease
                # ends implausibly far ahead (a clock that stepped back, a forged row) says
                # that too.
                hold = hold_of(row, owner, now=time.time(), lease_seconds=lease)
                report.outcomes.append(Outcome(row.call_id, row.state, HELD, _held_why(row, hold)))
        except BaseException:
            # What was settled before the failure keeps its record; the failure is the error.
            with contextlib.suppress(Exception):
                deferred.flush()
                receipts.sync()
            raise
        deferred.flush()
        receipts.sync()


def _look_again(
    ctx: Context, refs: set[str], history: dict[str, dict[str, list[str]]], walked: Walked
) -> None:
    """After the take-over, each of ``refs`` as it is now: a call that another process published
    after recover's walk (and died before settling it) is on the branch, and is found there under
    its claim instead of being recorded as "nothing took effect". Only the commits added since
    the walk are read (``history`` and ``walked`` updated), and only where the tip moved; a
    branch the walk found unborn is read whole, and so is one moved to a commit that is not
    above the walk's tip (rewound, or pushed with force): what the walk found is gone from it."""
    for ref in sorted(refs):
        if ref not in history:
            continue  # each of its calls asks the publisher (a shallow clone's)
        then, commits = walked.get(ref, (None, set()))
        now = ctx.publisher.tip(ref, fresh=True)
        if now is None or now == then:
            continue
        if then is not None and not ctx.store.is_ancestor(then, now):
            history[ref], then, commits = {}, None, set()
        commits.update(_add_calls(ctx, history[ref], now, then))
        walked[ref] = (now, commits)


def _renew_all(ledger: Ledger, call_ids: list[str], owner: Owner, lease: float) -> bool:
    """The heartbeat of a batch: renew each claim still held (True: some still is)."""
    return any([ledger.renew(c, owner, lease_seconds=lease) for c in call_ids])


def _held_why(row: CallRow, hold: Hold | None) -> str:
    short = row.call_id[:12]
    if hold is None:  # its claim changed hands while this process looked
        return "claimed by another process meanwhile; run 'applyonce recover' again"
    if hold.suspicious:
        return f"{hold.message}; {hold.hint}"
    return (
        f"held by {hold.owner.describe()} until {hold.until}: wait for its lease to end, or, if "
        f"no process runs it, run 'applyonce resolve {short} --release'"
    )


def _sync_unsynced(ctx: Context, report: RecoveryReport) -> None:
    settled = {o.call_id: i for i, o in enumerate(report.outcomes)}
    try:
        caught_up = resume_catch_up(ctx)
    except (ApplyOnceError, OSError) as exc:
        reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
        report.notes.append(f"checkout not updated ({reason}); run 'applyonce recover' again")
        report.unsynced = True
    else:
        if any(r.written for r in caught_up):
            report.notes.append("checkout brought up to the remote's branch (a catch-up cut short)")
        report.unsynced = report.unsynced or any(r.failed for r in caught_up)
    receipts = []
    for row in ctx.ledger.unsynced():
        try:
            receipts.append(stored_receipt(ctx, row.call_id, row=row))
        except ReceiptError as exc:
            report.notes.append(f"{row.call_id[:12]}: not synced, {exc.one_line()}")
            report.unsynced = True
    if not receipts:
        return
    try:
        sync_reports = sync_many(ctx, receipts)
    except (ApplyOnceError, OSError) as exc:
        reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
        report.notes.append(f"checkout not updated ({reason}); run 'applyonce recover' again")
        for receipt in receipts:
            _say_behind(
                report, settled, receipt.call_id, "checkout behind: not updated (see the note)"
            )
        report.unsynced = True
        return
    written = {p for r in sync_reports for p in r.written}
    for receipt in receipts:
        if not touched_paths_of(receipt) & written:
            continue  # its files were already as the branch has them
        if receipt.call_id in settled:
            o = report.outcomes[settled[receipt.call_id]]
            report.outcomes[settled[receipt.call_id]] = Outcome(
                o.call_id, o.was, o.now, o.why + "; checkout updated"
            )
        else:
            report.outcomes.append(
                Outcome(receipt.call_id, "committed", "committed", "checkout updated")
            )
    left = sorted({p for r in sync_reports for p in r.behind})
    if left:
        report.notes.append(
            "left your uncommitted changes in " + ", ".join(left[:10]) + ": they were made "
            "on the file as it was before the call's commit, so committing them as they are "
            "would undo that commit there; merge them with the committed version first"
        )
    failed = [f"checkout not updated: {r.failed}" for r in sync_reports if r.failed]
    report.notes.extend(failed)
    report.unsynced = report.unsynced or bool(failed)
    # A committed call whose checkout does not show its commit is not settled: said call by
    # call, with what brings the checkout in line.
    still = {row.call_id for row in ctx.ledger.unsynced()}
    for receipt in receipts:
        if receipt.call_id not in still:
            continue
        report.unsynced = True
        notes = behind_of(ctx, receipt.ref, sync_reports)
        why = (
            f"checkout behind: {notes[0].reason}; run '{notes[0].command}'"
            if notes
            else "checkout behind; run 'applyonce recover' again"
        )
        _say_behind(report, settled, receipt.call_id, why)


def _catch_up_checkouts(ctx: Context, report: RecoveryReport) -> None:
    """Bring this clone's checkouts up to their branches as a call would first (with a remote,
    a branch behind the remote's by calls only up to it: see
    :func:`~applyonce.flow.checkouts.sync.catch_up_checkouts`), whatever the ledger records: a
    ``synced`` event in a ledger the clones share may be another clone's (its recover, say), never a
    word on this clone's checkout. One left behind is said, with what brings it in line, and
    nothing is said to be settled."""
    try:
        caught_up = catch_up_checkouts(ctx)
    except (ApplyOnceError, OSError) as exc:
        reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
        report.notes.append(f"checkout not updated ({reason}); run 'applyonce recover' again")
        report.unsynced = True
        return
    for ref, reports in caught_up.items():
        branch = ref.removeprefix("refs/heads/")
        for written in [r for r in reports if r.written]:
            where = f"the checkout at {written.worktree}" if written.worktree else "the checkout"
            report.notes.append(
                f"{where} brought up to {branch}: "
                + ", ".join(written.written[:10])
                + (" …" if len(written.written) > 10 else "")
            )
        for behind in behind_of(ctx, ref, reports):
            note = (
                behind.line().removeprefix("note: ")
                if behind.paths
                else f"{behind.reason}; run '{behind.command}' to bring it in line"
            )
            report.notes.append(note)
            report.unsynced = True


def _say_behind(report: RecoveryReport, settled: dict[str, int], call_id: str, why: str) -> None:
    """Say of the committed call ``call_id`` that its checkout does not show its commit."""
    if call_id in settled:
        o = report.outcomes[settled[call_id]]
        report.outcomes[settled[call_id]] = Outcome(o.call_id, o.was, o.now, f"{o.why}; {why}")
    else:
        report.outcomes.append(Outcome(call_id, "committed", "committed", why))


def _history(
    ctx: Context, rows: Iterable[CallRow], report: RecoveryReport, walked: Walked
) -> dict[str, dict[str, list[str]]]:
    """One walk per ref: Call-Id → commits from the tip back to the oldest base of the calls
    being recovered (not one walk per call, nor one ancestry test per base: a base the walk
    never passes is not on the branch), and every commit of the branch into ``walked`` (for the
    repair of records, which would otherwise walk it again). Without a known base on the branch
    the whole branch is searched, and that is said."""
    by_ref: dict[str, list[str | None]] = {}
    for row in rows:
        by_ref.setdefault(row.ref, []).append(row.base_commit)
    index: dict[str, dict[str, list[str]]] = {}
    for ref, bases in by_ref.items():
        tip = ctx.publisher.tip(ref)
        remaining = {b for b in bases if b is not None}
        searching = True
        bounded = None not in bases
        found: dict[str, list[str]] = {}
        commits: set[str] = set()
        # Newest first, in topological order (every commit before its parents): once every base
        # has been passed, older commits cannot hold the calls, and are only listed.
        for commit in ctx.store.walk(tip):
            commits.add(commit)
            if not searching:
                continue
            for call in ctx.store.trailers_of(commit, key="Call-Id").all("Call-Id"):
                found.setdefault(call, []).append(commit)
            if bounded:
                remaining.discard(commit)
                searching = bool(remaining)
        if tip is not None:
            walked[ref] = (tip, commits)
            if not bounded or remaining:
                report.notes.append(
                    f"{ref}: a call has no known base on the branch; searched its whole history"
                )
                if ctx.store.hidden_below(tip):
                    # Not all of it is here (a shallow clone): "not found" means nothing, so
                    # each call asks the publisher, which answers only where the range is here.
                    continue
        index[ref] = found
    return index


def reconcile(
    ctx: Context,
    row: CallRow,
    *,
    history: dict[str, dict[str, list[str]]] | None = None,
    already_claimed: str | None = None,
    args: CallArgs | None = None,
    lease_seconds: float = DEFAULT_LEASE_S,
) -> Outcome | None:
    """Settle one in-flight call (``history``: recover's one walk per ref, see :func:`_history`;
    ``args``: the call's, when an apply of it takes it over), under a claim taken over here (kept
    renewed while it settles) or ``already_claimed`` by the caller. Returns None if its claim
    still holds."""
    if already_claimed is not None:
        return _reconcile(ctx, row, already_claimed, history, args)
    with Lessee(ctx, row.call_id, lease_seconds) as lessee:
        execution_id = ctx.ledger.take_over(row.call_id, lessee.owner, lease_seconds=lease_seconds)
        if execution_id is None:
            return None
        lessee.claimed()
        return _reconcile(ctx, row, execution_id, history, args)


def _reconcile(
    ctx: Context,
    row: CallRow,
    execution_id: str,
    history: dict[str, dict[str, list[str]]] | None,
    args: CallArgs | None,
) -> Outcome:
    receipt: Receipt | None = None
    with contextlib.suppress(ReceiptError):
        receipt = ctx.receipts.load(row.call_id)
    ident = receipt.identity if receipt is not None else recorded_identity(ctx.ledger, row.call_id)
    base = row.base_commit or (receipt.base_commit if receipt else None)
    if history is not None and row.ref in history:
        commits = history[row.ref].get(row.call_id, [])
    else:
        on_branch = base is not None and ctx.publisher.is_on(row.ref, base)
        commits = ctx.publisher.landed(row.ref, row.call_id, since=base if on_branch else None)
    if len(commits) > 1:
        settle.mark_unknown(ctx, ident, row.ref, row.base_commit, receipt, execution_id, commits)
        return Outcome(
            row.call_id,
            row.state,
            "unknown",
            f"{len(commits)} commits carry this Call-Id; "
            + settle.duplicate_hint(row.call_id, commits),
        )
    if len(commits) == 1:
        try:
            adopt_commit(ctx, ident, execution_id, row.ref, commits[0], receipt, args=args)
        except ForgedCallIdError:
            return _forged(row, commits[0])
        return Outcome(
            row.call_id,
            row.state,
            "committed",
            f"commit {commits[0][:12]} is on {row.ref}; bookkeeping finished",
        )
    meant = _staged_for(ctx, row.call_id)
    if meant is not None and meant != ctx.remote:
        # Staged for a remote's branch (its objects maybe pushed, maybe landed there): neither
        # rolled forward onto another branch nor said to have taken no effect.
        return Outcome(
            row.call_id,
            row.state,
            row.state,
            f"staged for remote {meant}'s branch; run 'applyonce recover --remote {meant}'",
        )
    orphan = _orphan_commit(ctx, row.call_id, base)
    if orphan is not None and base is not None and ctx.publisher.tip(row.ref) == base:
        rolled = _roll_forward(ctx, row, ident, execution_id, (base, orphan), receipt, args)
        if rolled is not None:
            if history is not None and row.ref in history:
                _found_since(ctx, history[row.ref], row.ref, base)
            return rolled
    error = InterruptedCallError(
        "the call was interrupted before its commit was published", call_id=row.call_id
    )
    settle.reject_interrupted(ctx, ident, execution_id, row, receipt, error)
    return Outcome(
        row.call_id,
        row.state,
        "rejected",
        "interrupted before the publish; nothing took effect (retryable)",
    )


def _roll_forward(
    ctx: Context,
    row: CallRow,
    ident: CallIdentity,
    execution_id: str,
    move: tuple[str, str],
    receipt: Receipt | None,
    args: CallArgs | None,
) -> Outcome | None:
    """Publish the call's staged commit (``move``: from its base, still the tip, to that
    commit), or adopt the commit that carries the call if another writer published it; then
    settle and sync it, its checkouts held from before the publish
    (:func:`applyonce.flow.checkouts.sync.publishing`), as a call's are. None: nothing of the call
    is on the branch."""
    base, orphan = move
    paths = sorted(ctx.store.paths_changed(base, orphan))
    with publishing(ctx, row.ref, paths) as held:
        try:
            ctx.publisher.publish(row.ref, base, orphan, reason=f"applyonce recover: {row.call_id}")
            published = orphan
            fault("after-roll-forward")
        except TipMovedError:
            # Whoever moved the tip may have published the call (a remote's branch: a recover,
            # or the same call, in another clone): then that commit is adopted.
            landed = ctx.publisher.landed(row.ref, row.call_id, since=base)
            if len(landed) != 1:
                return None
            published = landed[0]
        except CallOnBranchError as already:
            # The server's hook says a commit on the branch carries the call (landed by a clone
            # whose push this one's view missed): that commit is adopted.
            if already.call_id != row.call_id:
                raise
            published = already.commit
        try:
            adopted = adopt_commit(ctx, ident, execution_id, row.ref, published, receipt, args=args)
        except ForgedCallIdError:
            return _forged(row, published)
        why = (
            f"commit object {orphan[:12]} was staged; published it now"
            if published == orphan
            else f"commit {published[:12]} is on {row.ref}; bookkeeping finished"
        )
        reports = sync_after_publish(ctx, adopted, held=held)
    if touched_paths_of(adopted) & {p for r in reports for p in r.written}:
        why += "; checkout updated"
    return Outcome(row.call_id, row.state, "committed", why)


def _found_since(ctx: Context, found: dict[str, list[str]], ref: str, base: str) -> None:
    """Add to recover's walk of ``ref`` (``found``: Call-Id → commits, newest first) the calls
    a roll forward just put on it above ``base``: a group's staged commit carries the calls of
    the chain below it, which are settled after it, and must be found on the branch then."""
    tip = ctx.publisher.tip(ref)
    if tip is None or not ctx.store.has_object(tip):
        return
    _add_calls(ctx, found, tip, base)


def _add_calls(ctx: Context, found: dict[str, list[str]], tip: str, hide: str | None) -> list[str]:
    """Add to ``found`` (Call-Id → commits, newest first) the calls of the commits from ``tip``
    down to ``hide`` (None: the whole branch), each commit once; returns those commits."""
    above = list(ctx.store.walk_trailers(tip, hide=hide, key="Call-Id"))
    for commit, trailers in reversed(above):
        for call in trailers.all("Call-Id"):
            commits = found.setdefault(call, [])
            if commit not in commits:
                commits.insert(0, commit)
    return [commit for commit, _ in above]


def _forged(row: CallRow, commit: str) -> Outcome:
    return Outcome(
        row.call_id,
        row.state,
        "unknown",
        f"{FORGED} (commit {commit[:12]}); the patch did not run: run 'applyonce resolve'",
    )


def _staged_for(ctx: Context, call_id: str) -> str | None:
    """The remote whose branch the call's newest staged commit was for (None: its own branch,
    or nothing staged)."""
    for event in reversed(ctx.ledger.events(call_id)):
        if event.kind == EventKind.COMMIT_OBJECT:
            remote = event.data.get("remote")
            return str(remote) if remote else None
    return None


def _orphan_commit(ctx: Context, call_id: str, base: str | None) -> str | None:
    """The newest commit object staged for ``call_id`` on ``base``, if it still exists."""
    for event in reversed(ctx.ledger.events(call_id)):
        if event.kind != EventKind.COMMIT_OBJECT:
            continue
        commit = event.data.get("commit")
        if event.data.get("base") != base or not commit or not ctx.store.has_object(commit):
            return None
        if ctx.store.written.missing(str(commit), down_to=base):
            return None  # pruned in part: publishing it would leave the branch broken
        if call_id not in ctx.store.trailers_of(commit).all("Call-Id"):
            return None
        return str(commit)
    return None
