"""Rebuilding lost or untrustworthy records from Git (part of ``applyonce recover``).

Git is the truth; receipts and ledger rows are derived from it. A receipt without a ledger row
gets its row back (a committed one only once it verifies against Git); a committed call whose
receipt is missing or does not verify, or a call known only from its commit's Call-Id trailer,
gets its receipt rebuilt from the commit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid

from applyonce.core.identity import CallIdentity, sha256_hex
from applyonce.core.message import identity_from_trailers
from applyonce.core.receipt import Receipt, ReceiptError
from applyonce.errors import ApplyOnceError
from applyonce.flow.context import Context
from applyonce.flow.record import settle
from applyonce.flow.record.adopt import ForgedCallIdError, adopt_commit, paths_rewrite_adds
from applyonce.flow.record.settle import rewritten_note
from applyonce.flow.record.verify import verify_against_git
from applyonce.flow.recovery.report import Outcome, RecoveryReport
from applyonce.state.ledger import CallRow, Event, EventKind, RowChange, recorded_identity

# Without a record of the call's arguments, only the commit's own trailers speak for it: a commit
# that copied another call's trailers cannot be told apart until the call itself is sent again.
UNCHECKED = (
    " (its change could not be checked against the call's arguments, which no record kept;"
    " the next apply of the call checks it)"
)


def adopt_receipts(ctx: Context, report: RecoveryReport, *, known: set[str]) -> dict[str, CallRow]:
    """Give receipts without a ledger row (the ledger was lost, or moved aside because it broke)
    their row back (``known``: the calls with a row, as recover has just read them). Returns the
    rows of the prepared ones: they are in flight."""
    in_flight: dict[str, CallRow] = {}
    for call_id in ctx.receipts.call_ids():
        if call_id in known:
            continue
        with contextlib.suppress(ReceiptError):
            receipt = ctx.receipts.load(call_id)
            if receipt is not None and receipt.status == "prepared":
                created = ctx.ledger.ensure_row(
                    receipt.identity,
                    receipt.ref,
                    reason="prepared receipt without a ledger row",
                    change=RowChange(
                        state="prepared",
                        execution_id=receipt.execution_id,
                        base_commit=receipt.base_commit,
                    ),
                )
                row = ctx.ledger.get(call_id) if created else None
                if row is not None:
                    in_flight[call_id] = row
            elif receipt is not None:
                _adopt_settled(ctx, receipt, report)
    return in_flight


def _adopt_settled(ctx: Context, receipt: Receipt, report: RecoveryReport) -> None:
    if receipt.status == "committed":
        try:
            verify_against_git(ctx, receipt)
        except ReceiptError:
            return  # repair_records rebuilds it from the commit
    data = ctx.receipts.read_bytes(receipt.call_id) or b""
    change = settle.row_change_of(receipt, sha256_hex(data))
    ctx.ledger.ensure_row(
        receipt.identity,
        receipt.ref,
        reason="a receipt without a ledger row",
        change=dataclasses.replace(change, synced=receipt.status != "committed"),
    )
    report.outcomes.append(
        Outcome(receipt.call_id, "-", receipt.status, "ledger row restored from its receipt")
    )


# What a walk of a branch found: ref -> (the tip it started from, every commit reachable from it).
Walked = dict[str, tuple[str, set[str]]]


def repair_records(ctx: Context, report: RecoveryReport, walked: Walked | None = None) -> None:
    """Rebuild, from their commits, the receipts of committed calls that are missing or do not
    verify, and the record of calls known only from their Call-Id trailer. ``walked``: the
    commits of branches recover has just walked, used while a branch's tip has not moved since
    (instead of a second walk of it)."""
    rows = {row.call_id: row for row in ctx.ledger.calls()}
    refs = {row.ref for row in rows.values()}
    with contextlib.suppress(ApplyOnceError):
        refs.add(ctx.store.resolve_branch(None))
    assert ctx.index is not None
    for ref in sorted(refs):
        tip = ctx.publisher.tip(ref)
        if tip is None:
            continue
        calls = ctx.index.calls(ref)
        reachable = _reachable(ctx, tip, (walked or {}).get(ref))
        for call_id, commits in sorted(calls.items()):
            row = rows.get(call_id)
            on_branch = [c for c in commits if c in reachable]
            found = _record_problem(ctx, call_id, row, ref, on_branch)
            if found is None:
                continue
            problem, rewrite_of = found
            if len(on_branch) > 1 and row is None:
                _record_duplicate(ctx, call_id, ref, on_branch, report)
                continue
            if len(on_branch) != 1:
                continue  # gone from the branch, or duplicated: audit reports it
            ident = identity_from_trailers(ctx.store.trailers_of(on_branch[0]))
            if row is not None:
                with contextlib.suppress(ReceiptError):
                    ident = recorded_identity(ctx.ledger, call_id)
            if ident is None or ident.recompute() != call_id:
                report.notes.append(f"{call_id[:12]}: its trailers do not recompute; left alone")
                continue
            ctx.ledger.ensure_row(ident, ref, reason=problem)
            execution_id = uuid.uuid4().hex
            try:
                adopt_commit(
                    ctx, ident, execution_id, ref, on_branch[0], None, rewrite_of=rewrite_of
                )
            except ForgedCallIdError as exc:
                report.outcomes.append(
                    Outcome(call_id, row.state if row else "-", "unknown", exc.message)
                )
                continue
            ctx.ledger.record(
                Event(call_id, execution_id, EventKind.REPAIRED, data={"reason": problem})
            )
            report.outcomes.append(
                Outcome(
                    call_id,
                    row.state if row else "-",
                    "committed",
                    f"{problem}; rebuilt it from commit {on_branch[0][:12]}"
                    + (UNCHECKED if row is None else "")
                    + _added_by_the_user(ctx, rewrite_of, on_branch[0]),
                )
            )


def _added_by_the_user(ctx: Context, own: str | None, rewrite: str) -> str:
    added = [] if own is None else paths_rewrite_adds(ctx, own, rewrite)
    return f", which also changes {', '.join(added)}" if added else ""


def _reachable(ctx: Context, tip: str, known: tuple[str, set[str]] | None) -> set[str]:
    """The commits of the branch at ``tip``: those recover's walk listed if the tip is the one
    it started from, or one commit on top of it (a staged call it rolled forward); else a walk."""
    if known is not None:
        walked_tip, commits = known
        if tip == walked_tip:
            return commits
        if ctx.store.parents_of(tip) == [walked_tip]:
            return commits | {tip}
    return set(ctx.store.walk(tip))


def _record_duplicate(
    ctx: Context, call_id: str, ref: str, commits: list[str], report: RecoveryReport
) -> None:
    """A call with no record and several commits: record it as unknown, for 'resolve'."""
    ident: CallIdentity | None = identity_from_trailers(ctx.store.trailers_of(commits[0]))
    if ident is None or ident.recompute() != call_id:
        return
    ctx.ledger.ensure_row(ident, ref, reason="several commits carry its Call-Id")
    row = ctx.ledger.get(call_id)
    assert row is not None
    settle.mark_unknown(ctx, ident, ref, row.base_commit, None, uuid.uuid4().hex, commits)
    report.outcomes.append(
        Outcome(
            call_id,
            "-",
            "unknown",
            f"{len(commits)} commits carry this Call-Id; "
            + settle.duplicate_hint(call_id, commits),
        )
    )


def _record_problem(
    ctx: Context, call_id: str, row: CallRow | None, ref: str, on_branch: list[str]
) -> tuple[str, str | None] | None:
    """Why the record of a call seen on ``ref`` needs rebuilding (None: it does not), and the
    call's own commit when the one on the branch may be the user's rewrite of it."""
    if row is not None and row.state != "committed":
        return None  # in flight (reconciled above), rejected or unknown: not ours to rewrite
    if row is not None and row.ref != ref:
        # A copy of the call's commit on another branch (a cherry-pick): the record belongs to
        # the call's own branch, and rewriting it here would make it flip between the two.
        return None
    try:
        receipt = ctx.receipts.load(call_id, expected_sha256=row.receipt_sha256 if row else None)
    except ReceiptError:
        return "its receipt did not verify", None
    if receipt is None:
        return ("its receipt was missing" if row else "it had no record at all"), None
    if receipt.status == "committed" and receipt.commit not in on_branch:
        if rewritten_note(ctx.ledger, call_id, receipt.commit) is not None:
            return None  # a person recorded the rewrite ('resolve --as rewritten'): it stands
        return "its commit was rewritten by the user (amend, rebase)", receipt.commit
    return None
