"""The approval gate: a call that touches a protected path (or any call, with ``--confirm``) runs
only once someone approved its plan. Asked once per call, before its first check; a repeat or a
reconciled call is never asked."""

from __future__ import annotations

import fnmatch

from applyonce.errors import ApplyOnceError
from applyonce.flow.context import Context
from applyonce.flow.options import CallOptions, PlanView
from applyonce.state.ledger import Event, EventKind


class ApprovalError(ApplyOnceError):
    kind = "approval"


def protected_paths(view: PlanView, globs: tuple[str, ...] | list[str]) -> list[str]:
    """The changed paths (a move's source included) that match a ``--protect`` glob."""
    return [
        c.path
        for c in view.plan.changes
        for p in ([c.path, c.from_path] if c.from_path else [c.path])
        if any(fnmatch.fnmatchcase(p, glob) for glob in globs)
    ]


def approval_gate(ctx: Context, view: PlanView, execution_id: str, options: CallOptions) -> None:
    """Ask for approval if the call needs it; record the answer.

    Raises:
        ApprovalError: approval is needed and nobody can give it, or it was denied.
    """
    protected = protected_paths(view, list(options.protect or ()))
    if not protected and not options.require_approval:
        return
    if options.approve is None:
        raise ApprovalError(
            f"the patch touches protected paths ({', '.join(protected[:3])}) and needs approval",
            retryable=True,
            hint="repeat the call with --confirm (or an approve callback)",
        )
    approved = bool(options.approve(view))
    kind = EventKind.APPROVED if approved else EventKind.DENIED
    ctx.ledger.record(Event(view.call_id, execution_id, kind, data={"protected": protected}))
    if not approved:
        raise ApprovalError(
            "the patch was not approved", hint="send a different patch as a new attempt"
        )
