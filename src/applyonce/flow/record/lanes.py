"""What a call was, from its record: its args as the ledger recorded them (a patch call's patch
source first), for adopting its commit and for landing a lane call through the same engine
(docs/design.md §12, "Lanes")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from pydantic import ValidationError

from applyonce.core.identity import TOOL, ApplyPatchArgs, CallIdentity, source_text
from applyonce.core.land import LAND_TOOL, LandArgs
from applyonce.core.revert import REVERT_TOOL, RevertArgs
from applyonce.errors import ApplyOnceError
from applyonce.flow.context import Context
from applyonce.patch import PatchFormat, parse
from applyonce.patch.limits import UNCAPPED
from applyonce.state.ledger import LoggedEvent, claimed_data, recorded_identity

CallArgs = ApplyPatchArgs | RevertArgs | LandArgs


def lane_call_args(ctx: Context, call_id: str, lane: str) -> ApplyPatchArgs | None:
    """The args of the ``apply_patch`` call ``call_id`` made on ``lane``, from its recorded patch
    source (else its recorded args), each only if it recomputes the call's ``Args-Sha256``; None
    when this ledger does not know them (a revert, or a call another ledger recorded)."""
    events = ctx.ledger.events(call_id)  # read once: the identity, the source and the args
    try:
        ident = recorded_identity(ctx.ledger, call_id, events=events)
    except ApplyOnceError:
        return None
    if ident.tool != TOOL:
        return None
    for found in candidate_args(ctx, ident, lane, None, events=events):
        if isinstance(found, ApplyPatchArgs):
            return found
    return None


def candidate_args(
    ctx: Context,
    ident: CallIdentity,
    ref: str,
    args: CallArgs | None,
    *,
    events: list[LoggedEvent] | None = None,
) -> Iterator[CallArgs | None]:
    """The call's args, from wherever they are known, each only if it is the call's
    (``events``: the call's ledger events, read already)."""
    if args is not None and args.sha256() == ident.args_sha256:
        yield args
    if events is None:
        events = ctx.ledger.events(ident.call_id)
    if ident.tool == REVERT_TOOL:
        # A revert's args are its whole record (no patch text): the reverted call and commit.
        try:
            data = claimed_data(ctx.ledger, ident.call_id, "args", events=events)
            recorded = RevertArgs.model_validate(data)
        except ValidationError:
            return
        yield recorded if recorded.sha256() == ident.args_sha256 else None
        return
    if ident.tool == LAND_TOOL:
        # A landing's args are its whole record too: the lane call, its commit, the two branches.
        try:
            data = claimed_data(ctx.ledger, ident.call_id, "args", events=events)
            landing = LandArgs.model_validate(data)
        except ValidationError:
            return
        yield landing if landing.sha256() == ident.args_sha256 else None
        return
    source = claimed_data(ctx.ledger, ident.call_id, "source", events=events)
    data = claimed_data(ctx.ledger, ident.call_id, "args", events=events)
    try:
        if source is not None:
            # The call passed the caps when it ran; its own record is re-read whatever they are now.
            patch = parse(source_text(source), cast(PatchFormat, source["format"]), limits=UNCAPPED)
            found = ApplyPatchArgs.from_patch(patch, ref=ref, repo_root=ctx.repo_root)
            yield found if found.sha256() == ident.args_sha256 else None
        if data is not None:
            found = ApplyPatchArgs.model_validate(data)
            yield found if found.sha256() == ident.args_sha256 else None
    except (ApplyOnceError, ValueError, KeyError):
        return
