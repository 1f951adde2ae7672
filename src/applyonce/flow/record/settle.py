"""Settling a call: its receipt and its ledger row, always written together, in this order.

The receipt is written first (atomically, fsynced), then the ledger records the event that points
at the receipt's digest, so a ledger row never names a receipt that is not on disk. What a
receipt puts in its call's row is decided in one place, :func:`row_change_of`.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import CheckRecord, FileRecord, Receipt, SignatureRecord, public_url
from applyonce.core.signature import describe
from applyonce.core.texts import rejection_text, success_text, unknown_text
from applyonce.errors import EXIT_COMMITTED, EXIT_UNKNOWN, ApplyOnceError
from applyonce.faults import fault
from applyonce.flow.context import Context
from applyonce.state.ledger import CallRow, Event, EventKind, Ledger, RowChange

FORGED = "a commit carries this Call-Id but not its change"
# The outcome ``applyonce resolve --as rewritten`` records (:mod:`applyonce.flow.recovery.resolve`).
REWRITTEN = "rewritten"


def duplicate_hint(call_id: str, commits: Sequence[str], *, standing: str | None = None) -> str:
    """What settles a call several commits carry (``commits``): ``resolve --as committed``
    needs ``--commit``, the one that is the call's (``standing``: the one no later commit
    undid, when that is known)."""
    short = call_id[:12]
    if standing is not None:
        return (
            f"run 'applyonce resolve {short} --as committed --commit {standing[:12]} --note "
            f"TEXT' ({standing[:12]} is the one no later commit undid)"
        )
    listed = " or ".join(c[:12] for c in commits)
    return (
        f"decide which commit is the call's ({listed}; 'applyonce audit' counts one a later "
        f"commit undid), then run 'applyonce resolve {short} --as committed --commit COMMIT "
        "--note TEXT'"
    )


def unknown_hint(call_id: str, error: dict[str, object] | None) -> str:
    """What settles a call recorded as unknown, as its receipt's ``error`` says why."""
    commits = (error or {}).get("commits")
    if (error or {}).get("kind") == "duplicate-call-id" and isinstance(commits, list):
        return duplicate_hint(call_id, [str(c) for c in commits])
    short = call_id[:12]
    return (
        f"see 'applyonce show {short}', then settle it with 'applyonce resolve {short} --as "
        "committed|rejected --note TEXT'"
    )


def row_change_of(receipt: Receipt, sha256: str | None) -> RowChange:
    """The columns a settled receipt sets in its call's row."""
    change = RowChange(
        state=receipt.status,
        execution_id=receipt.execution_id,
        exit_code=receipt.exit_code,
        retryable=receipt.retryable,
        commit_id=receipt.commit,
        base_commit=receipt.base_commit,
    )
    return change if sha256 is None else dataclasses.replace(change, receipt_sha256=sha256)


def record_settled(ctx: Context, receipt: Receipt, kind: EventKind, *, sha256: str | None) -> None:
    """The ledger half of settling ``receipt``: one event, its row changed to match."""
    ctx.ledger.record(
        Event(receipt.call_id, receipt.execution_id, kind, row_change_of(receipt, sha256))
    )


def published_to(ctx: Context) -> str | None:
    """The URL (no user name or password) of the remote whose branch is the commit point, as a
    receipt records it; None for the repository's own branch."""
    if ctx.remote is None:
        return None
    url = ctx.store.config_value(f"remote.{ctx.remote}.url")
    return public_url(url) if url is not None else ctx.remote


def signature_of(ctx: Context, commit_id: str) -> SignatureRecord | None:
    """How the published commit ``commit_id`` is signed, as its receipt records it: read from
    the commit itself, so a call settled by recovery records what one that ran to its end does
    (docs/design.md §4)."""
    described = describe(ctx.store.commit_signature(commit_id) or "")
    return None if described is None else SignatureRecord(format=described[0], key=described[1])


def prepare(
    ctx: Context,
    ident: CallIdentity,
    execution_id: str,
    *,
    ref: str,
    base: str | None,
    tool_call_id: str | None,
    no_verify: bool = False,
) -> Receipt:
    """The ``prepared`` receipt and event: the call is about to be staged on ``base``."""
    prepared = prepared_receipt(
        ctx,
        ident,
        execution_id,
        ref=ref,
        base=base,
        tool_call_id=tool_call_id,
        no_verify=no_verify,
    )
    sha = ctx.receipts.write(prepared)
    ctx.ledger.record(prepared_event(prepared, sha))
    return prepared


def prepared_receipt(
    ctx: Context,
    ident: CallIdentity,
    execution_id: str,
    *,
    ref: str,
    base: str | None,
    tool_call_id: str | None,
    no_verify: bool = False,
) -> Receipt:
    """The ``prepared`` receipt of a call about to be staged on ``base`` (nothing written)."""
    return Receipt.of_call(
        ident,
        status="prepared",
        execution_id=execution_id,
        ref=ref,
        tool_call_id=tool_call_id,
        base_commit=base,
        remote=published_to(ctx),
        no_verify=no_verify,
    )


def prepared_event(prepared: Receipt, sha256: str) -> Event:
    """The ledger's ``prepared`` event of the receipt ``prepared`` (whose digest is ``sha256``)."""
    return Event(
        prepared.call_id,
        prepared.execution_id,
        EventKind.PREPARED,
        RowChange(state="prepared", base_commit=prepared.base_commit, receipt_sha256=sha256),
    )


def prepare_many(ctx: Context, prepared: Sequence[Receipt]) -> None:
    """Write the ``prepared`` receipts of a group of calls (each fsynced, their directory once),
    then their events in one ledger transaction: the group's one durable pending flush."""
    batch = ctx.receipts.batch()
    shas = [batch.write(receipt) for receipt in prepared]
    batch.sync()
    ctx.ledger.record(*(prepared_event(r, sha) for r, sha in zip(prepared, shas, strict=True)))


def committed_receipt(
    ctx: Context,
    prepared: Receipt,
    *,
    base: str | None,
    commit_id: str,
    files: tuple[FileRecord, ...],
    match_levels: dict[str, list[str]],
    checks: Sequence[CheckRecord],
) -> Receipt:
    """The ``committed`` receipt of a call whose commit was published (nothing written)."""
    return prepared.with_output(
        success_text(files),
        status="committed",
        base_commit=base,
        commit=commit_id,
        files=files,
        match_levels=match_levels,
        checks=tuple(checks),
        exit_code=EXIT_COMMITTED,
        signature=signature_of(ctx, commit_id),
    )


def rejected_receipt(
    prepared: Receipt, error: ApplyOnceError, checks: Sequence[CheckRecord] = ()
) -> Receipt:
    """The ``rejected`` receipt of a call that did not take effect, saying why (nothing
    written)."""
    records = getattr(error, "checks", checks)
    return prepared.with_output(
        rejection_text(error.to_dict()),
        status="rejected",
        error=error.to_dict(),
        checks=tuple(records),
        exit_code=error.exit_code,
    )


def settle_many(ctx: Context, settled: Sequence[Receipt]) -> None:
    """Settle a group of calls at once (``committed`` and ``rejected`` receipts): each receipt
    written and fsynced, the receipts directory once, then every event in one ledger
    transaction. The fault points keep their meaning for each call: ``after-receipt`` once the
    receipts are durable, ``after-ledger`` once the ledger is."""
    batch = ctx.receipts.batch()
    events: list[Event] = []
    for receipt in settled:
        committed = receipt.status == "committed"
        point = "after-receipt-tmp" if committed else "after-reject-receipt-tmp"
        sha = batch.write(receipt, before_replace=functools.partial(fault, point))
        kind = EventKind.COMMITTED if committed else EventKind.REJECTED
        events.append(
            Event(receipt.call_id, receipt.execution_id, kind, row_change_of(receipt, sha))
        )
    batch.sync()
    if any(receipt.status == "committed" for receipt in settled):
        fault("after-receipt")
    ctx.ledger.record(*events)
    if any(receipt.status == "committed" for receipt in settled):
        fault("after-ledger")


def commit(
    ctx: Context,
    prepared: Receipt,
    *,
    base: str | None,
    commit_id: str,
    files: tuple[FileRecord, ...],
    match_levels: dict[str, list[str]],
    checks: Sequence[CheckRecord],
) -> Receipt:
    """Settle a call whose commit was just published as ``committed``."""
    committed = committed_receipt(
        ctx,
        prepared,
        base=base,
        commit_id=commit_id,
        files=files,
        match_levels=match_levels,
        checks=checks,
    )
    sha = ctx.receipts.write(committed, before_replace=lambda: fault("after-receipt-tmp"))
    fault("after-receipt")
    record_settled(ctx, committed, EventKind.COMMITTED, sha256=sha)
    fault("after-ledger")
    return committed


def reject(
    ctx: Context, prepared: Receipt, error: ApplyOnceError, checks: Sequence[CheckRecord] = ()
) -> Receipt:
    """Settle a call that did not take effect as ``rejected``, saying why."""
    rejected = rejected_receipt(prepared, error, checks)
    sha = ctx.receipts.write(rejected, before_replace=lambda: fault("after-reject-receipt-tmp"))
    record_settled(ctx, rejected, EventKind.REJECTED, sha256=sha)
    return rejected


def reject_interrupted(
    ctx: Context,
    ident: CallIdentity,
    execution_id: str,
    row: CallRow,
    prepared: Receipt | None,
    error: ApplyOnceError,
) -> Receipt:
    """Close a call that died before its publish: nothing took effect; it may run again."""
    base = prepared or Receipt.of_call(
        ident,
        status="prepared",
        execution_id=execution_id,
        ref=row.ref,
        base_commit=row.base_commit,
    )
    base = base.model_copy(update={"execution_id": execution_id, "reconciled": True})
    return reject(ctx, base, error)


def mark_unknown(
    ctx: Context,
    ident: CallIdentity,
    ref: str,
    base: str | None,
    receipt: Receipt | None,
    execution_id: str,
    commits: list[str],
    *,
    kind: str = "duplicate-call-id",
) -> Receipt:
    """The call's outcome is for a person to decide: several commits carry its Call-Id
    (``duplicate-call-id``), or one does without its change (``forged-call-id``)."""
    if kind == "forged-call-id":
        message = f"{FORGED} (commit {commits[0][:12]})"
    else:
        message = f"{len(commits)} commits carry this Call-Id"
    unknown = Receipt.of_call(
        ident,
        status="unknown",
        execution_id=execution_id,
        ref=ref,
        created_at=receipt.created_at if receipt else None,
        tool_call_id=receipt.tool_call_id if receipt else None,
        base_commit=base,
        error={"kind": kind, "message": message, "commits": commits, "retryable": False},
        exit_code=EXIT_UNKNOWN,
        reconciled=True,
    ).with_output(unknown_text(ident.call_id))
    sha = ctx.receipts.write(unknown)
    ctx.ledger.record(
        Event(
            ident.call_id,
            execution_id,
            EventKind.UNKNOWN,
            RowChange(state="unknown", receipt_sha256=sha, exit_code=EXIT_UNKNOWN),
            {"commits": commits, "kind": kind},
        )
    )
    return unknown


def rewritten_note(ledger: Ledger, call_id: str, commit: str | None) -> str | None:
    """The note of the latest ``resolve --as rewritten`` of ``call_id`` for ``commit``, if any."""
    note = None
    for event in ledger.events(call_id):
        data = event.data
        rewritten = event.kind == EventKind.RESOLVED and data.get("as") == REWRITTEN
        if rewritten and data.get("commit") == commit:
            note = str(data.get("note", ""))
    return note
