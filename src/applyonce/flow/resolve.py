"""A person's decision on a call whose outcome is unknown (``applyonce resolve``)."""

from __future__ import annotations

import uuid

from applyonce.core.receipt import Receipt, ReceiptError
from applyonce.errors import ApplyOnceError, UsageError
from applyonce.flow import settle
from applyonce.flow.adopt import adopt_commit
from applyonce.flow.context import Context
from applyonce.state.ledger import Event, EventKind


class ResolvedAsRejectedError(ApplyOnceError):
    kind = "resolved"
    default_hint = "a person decided this call did not take effect; send a new attempt if needed"


def resolve(
    ctx: Context, call_id: str, *, outcome: str, note: str, commit: str | None = None
) -> Receipt:
    """Record ``outcome`` (committed or rejected) for ``call_id``, with the person's ``note``.

    Raises:
        UsageError: the call is not unknown, the note is empty, or the commit is not the call's.
    """
    row = ctx.ledger.get(call_id)
    if row is None:
        raise UsageError(f"no call {call_id[:12]} in the ledger")
    if row.state != "unknown":
        raise UsageError(
            f"call {call_id[:12]} is {row.state}; resolve is for calls whose outcome is unknown",
            hint="run 'applyonce recover' for interrupted calls",
        )
    if not note.strip():
        raise UsageError("--note must say why", hint="pass --note TEXT")
    current = ctx.receipts.load(call_id, expected_sha256=row.receipt_sha256)
    if current is None:
        raise ReceiptError(f"receipt {call_id[:12]} is missing", call_id=call_id)
    execution_id = uuid.uuid4().hex
    if outcome == "committed":
        candidates = ctx.publisher.landed(row.ref, call_id)
        if commit is not None:
            chosen = ctx.store.resolve_commit(commit)
            if chosen not in candidates:
                raise UsageError(f"{commit} is not a commit of {row.ref} carrying this Call-Id")
        elif len(candidates) == 1:
            chosen = candidates[0]
        else:
            raise UsageError(
                f"{len(candidates)} commits on {row.ref} carry this Call-Id",
                hint="pass --commit with the one that counts",
            )
        receipt = adopt_commit(
            ctx, current.identity, execution_id, row.ref, chosen, current, note=note
        )
    elif outcome == "rejected":
        error = ResolvedAsRejectedError(f"resolved as rejected: {note}")
        update = {"execution_id": execution_id, "note": note}
        receipt = settle.reject(ctx, current.model_copy(update=update), error)
    else:
        raise UsageError(f"--as must be committed or rejected, not {outcome!r}")
    ctx.ledger.record(
        Event(call_id, execution_id, EventKind.RESOLVED, data={"as": outcome, "note": note})
    )
    return receipt
