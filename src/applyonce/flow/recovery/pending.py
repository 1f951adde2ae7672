"""Pushes left half done on a remote (part of ``applyonce recover`` with ``--remote``).

A call published to a remote pushes its commit under a pending ref first, then moves the branch
(:mod:`applyonce.git.remote`). A process killed between the two leaves the pending ref; recover,
from this clone or any other:

* fetches every pending ref first (:func:`fetch_pending`), so the staged commit object is here
  even in a clone that never had it: a call in flight in this ledger then rolls forward as a
  commit object staged here would (:func:`applyonce.flow.recovery.recover.reconcile`);
* then (:func:`settle_pending`) deletes each pending ref whose commit is on the branch, or can
  never be (the branch moved on from its base: the parent of a call's commit, the base of a
  group's chain), or whose call this ledger has settled. A
  pending commit of a call still held by a live owner here is left to that owner. One whose call
  this ledger has no record of (another clone's, with a ledger of its own; or a commit crafted by
  anyone who may push ``refs/applyonce/*``) is left too, never published: without the call's
  record nothing shows that the commit carries the call's change — its identity trailers are
  self-consistent in any commit that copies them. The recover of the clone (or ledger) that
  made it publishes it.
"""

from __future__ import annotations

from applyonce.errors import ApplyOnceError
from applyonce.flow.context import Context
from applyonce.flow.recovery.report import RecoveryReport
from applyonce.git.remote import RemotePublisher
from applyonce.state.ledger import IN_FLIGHT

Pending = list[tuple[str, str]]  # (ref, commit)


def fetch_pending(ctx: Context) -> Pending:
    """The remote's pending pushes, their objects fetched here ([] for a local branch)."""
    if not isinstance(ctx.publisher, RemotePublisher):
        return []
    return ctx.publisher.pending()


def settle_pending(ctx: Context, pending: Pending, report: RecoveryReport) -> None:
    """Roll forward or delete the pending pushes (see the module docstring)."""
    publisher = ctx.publisher
    if not isinstance(publisher, RemotePublisher):
        return
    for ref, commit in pending:
        short = commit[:12]
        try:
            if _settle_one(ctx, publisher, ref, commit, report):
                publisher.forget_pending(ref, commit)
        except ApplyOnceError as exc:
            report.notes.append(f"pending push {short} to {ref} left: {exc.one_line()}")


def _settle_one(
    ctx: Context, publisher: RemotePublisher, ref: str, commit: str, report: RecoveryReport
) -> bool:
    """Settle one pending push; True: its pending ref may go."""
    store = ctx.store
    tip = publisher.tip(ref)
    if tip is not None and (tip == commit or store.is_ancestor(commit, tip)):
        return True  # published
    if tip is None:
        if store.parent_of(commit) is not None:
            return True  # the branch is gone: a commit with a parent can never start it again
    elif not store.is_ancestor(tip, commit):
        return True  # the branch moved on from its base: it can never be published
    # A group's chain is pushed as one: every call above the branch's tip.
    calls = [
        call
        for _, trailers in store.walk_trailers(commit, hide=tip, key="Call-Id")
        for call in trailers.all("Call-Id")
    ]
    rows = [ctx.ledger.get(call) for call in calls]
    if any(row is not None and row.state in IN_FLIGHT for row in rows):
        report.notes.append(
            f"pending push {commit[:12]} to {ref}: its call is still held; run 'applyonce "
            "recover' again once it is settled"
        )
        return False
    if any(row is not None for row in rows):
        return True  # settled here (it did not land): nothing is left to do with it
    # Unknown here: nothing shows it carries its call's change (anyone may copy a call's
    # trailers onto any tree), so publishing it could put a stranger's commit on the branch.
    report.notes.append(
        f"pending push {commit[:12]} to {ref}: its call is not in this ledger; left for "
        "'applyonce recover' in the clone (or with the ledger) that made it"
    )
    return False
