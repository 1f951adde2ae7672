"""What a lane call was: its own patch, as the ledger recorded it, for landing it through the
same engine (docs/design.md §12, "Lanes")."""

from __future__ import annotations

from applyonce.core.identity import TOOL, ApplyPatchArgs
from applyonce.errors import ApplyOnceError
from applyonce.flow.context import Context
from applyonce.state.ledger import recorded_identity


def lane_call_args(ctx: Context, call_id: str, lane: str) -> ApplyPatchArgs | None:
    """The args of the ``apply_patch`` call ``call_id`` made on ``lane``, from its recorded patch
    source (else its recorded args), each only if it recomputes the call's ``Args-Sha256``; None
    when this ledger does not know them (a revert, or a call another ledger recorded)."""
    from applyonce.flow.record.adopt import candidate_args

    try:
        ident = recorded_identity(ctx.ledger, call_id)
    except ApplyOnceError:
        return None
    if ident.tool != TOOL:
        return None
    for found in candidate_args(ctx, ident, lane, None):
        if isinstance(found, ApplyPatchArgs):
            return found
    return None
