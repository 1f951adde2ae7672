"""A person's decisions (``applyonce resolve``): the outcome of a call whose outcome is unknown,
(``--as rewritten``) that a committed call's commit was rewritten away by hand (a reset, a
squash), or (``--release``) freeing the claim of a call stuck in flight."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from applyonce.core.receipt import Receipt, ReceiptError
from applyonce.errors import ApplyOnceError, UsageError
from applyonce.flow.context import Context
from applyonce.flow.inspect.calls import MIN_PREFIX, find_call_id
from applyonce.flow.record import settle
from applyonce.flow.record.adopt import adopt_commit
from applyonce.flow.record.settle import REWRITTEN
from applyonce.state.lease import Owner
from applyonce.state.ledger import IN_FLIGHT, CallRow, Event, EventKind


class ResolvedAsRejectedError(ApplyOnceError):
    kind = "resolved"
    default_hint = "a person decided this call did not take effect; send a new attempt if needed"


def resolve(
    ctx: Context, call_id: str, *, outcome: str, note: str, commit: str | None = None
) -> Receipt:
    """Record ``outcome`` (committed, rejected, or rewritten) for ``call_id``, with the
    person's ``note``.

    Raises:
        UsageError: the call is not unknown (not committed, or its commit still on the branch,
            for ``rewritten``), the note is empty, or the commit is not the call's.
    """
    row = ctx.ledger.get(call_id)
    if row is None:
        raise UsageError(f"no call {call_id[:12]} in the ledger")
    if outcome == REWRITTEN:
        return _resolve_rewritten(ctx, row, note=note, commit=commit)
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
            listed = " or ".join(c[:12] for c in candidates)
            raise UsageError(
                f"{len(candidates)} commits on {row.ref} carry this Call-Id",
                hint=f"pass --commit with the one that counts ({listed})"
                if candidates
                else "pass --as rejected if the call did not take effect",
            )
        receipt = adopt_commit(
            ctx, current.identity, execution_id, row.ref, chosen, current, note=note
        )
    elif outcome == "rejected":
        error = ResolvedAsRejectedError(f"resolved as rejected: {note}")
        update = {"execution_id": execution_id, "note": note}
        receipt = settle.reject(ctx, current.model_copy(update=update), error)
    else:
        raise UsageError(f"--as must be committed, rejected or rewritten, not {outcome!r}")
    ctx.ledger.record(
        Event(call_id, execution_id, EventKind.RESOLVED, data={"as": outcome, "note": note})
    )
    return receipt


def _resolve_rewritten(ctx: Context, row: CallRow, *, note: str, commit: str | None) -> Receipt:
    """Record that a committed call's commit was rewritten away by hand. The receipt stays as
    it is (it is true: the call did commit, as that commit); the ``resolved`` event is the
    record, which ``audit`` reads (:func:`~applyonce.flow.record.settle.rewritten_note`), so the
    call is no longer a problem.

    Raises:
        UsageError: the call is not committed, or its commit is still on the branch.
    """
    short = row.call_id[:12]
    if commit is not None:
        raise UsageError("--commit is for --as committed", hint="leave it out with --as rewritten")
    if not note.strip():
        raise UsageError("--note must say why", hint="pass --note TEXT")
    receipt = ctx.receipts.load(row.call_id, expected_sha256=row.receipt_sha256)
    if receipt is None:
        raise ReceiptError(f"receipt {short} is missing", call_id=row.call_id)
    if receipt.status != "committed" or receipt.commit is None:
        raise UsageError(
            f"call {short} is {receipt.status}; --as rewritten is for a committed call",
            hint="see 'applyonce show' for the call",
        )
    if ctx.publisher.is_on(receipt.ref, receipt.commit):
        raise UsageError(
            f"call {short}'s commit {receipt.commit[:12]} is still on {receipt.ref}; "
            "nothing was rewritten",
            hint="--as rewritten is for a commit the branch lost to a reset or squash; to undo "
            "the call, run 'applyonce revert'",
        )
    ctx.ledger.record(
        Event(
            row.call_id,
            receipt.execution_id,
            EventKind.RESOLVED,
            data={"as": REWRITTEN, "note": " ".join(note.split()), "commit": receipt.commit},
        )
    )
    return receipt


@dataclass(frozen=True)
class Released:
    """A claim freed by hand: the call's row as it was."""

    row: CallRow

    def line(self) -> str:
        """What ``applyonce resolve --release`` prints."""
        row, until = self.row, self.row.lease.expires_at if self.row.lease else None
        held = row.owner.describe() if row.owner else "no process"
        return (
            f"call {row.call_id[:12]} released: {held} held it"
            + (f" (lease until {until})" if until else "")
            + "; repeat the call, or run 'applyonce recover', to settle it through Git"
        )

    def to_dict(self) -> dict[str, Any]:
        row = self.row
        return {
            "call_id": row.call_id,
            "state": row.state,
            "released": row.owner.as_dict() if row.owner else None,
            "lease_until": row.lease.expires_at if row.lease else None,
        }


def release(ctx: Context, prefix: str, *, note: str = "") -> Released:
    """Free the claim on the in-flight call ``prefix`` names (its owner crashed where this host
    cannot see, or the record is wrong), in one ``released`` event with the person's ``note``.
    The next claim takes the call over and settles it through Git.

    Raises:
        UsageError: no such call, or it is not in flight (nothing is written).
        ClaimStillHeldError: its owner provably runs on this host (nothing is written).
    """
    wanted = prefix.strip().lower()
    # A call killed right after its claim has no receipt yet: look among the calls in flight.
    matches = [
        row.call_id
        for row in ctx.ledger.calls(states=IN_FLIGHT)
        if len(wanted) >= MIN_PREFIX and row.call_id.startswith(wanted)
    ]
    if len(matches) > 1:
        raise UsageError(f"{prefix!r} matches {len(matches)} calls", hint="give more characters")
    call_id = matches[0] if matches else find_call_id(ctx, prefix)
    return Released(ctx.ledger.release(call_id, by=Owner.me(), note=note))
