"""Adopting a commit: the record of a call whose commit is already on the branch.

Used wherever Git says a call landed but its record does not say so yet (a takeover, recovery,
repair, resolve, a lost race against another execution of the same call). Nothing is staged or
published again: the receipt is derived from the commit.

A commit is found by its ``Call-Id`` trailer, which anyone can copy into any commit message. So a
commit is adopted only when it carries the call's change (:func:`change_of_commit`); one that
carries the trailer but another change makes the call ``unknown`` (``forged-call-id``), for a
person to settle, and the patch is never reported as applied.

A user may rewrite the call's own commit — the one applyonce published, which its committed
receipt names — with ``git commit --amend`` (the message kept, so its trailers too), ``git
rebase`` or a ``git cherry-pick`` after a reset. The rewrite still carries the call's change on
the call's paths; it is adopted as *rewritten by the user*, and may then also change other paths
(an amend that added a file): the patch ran, as that commit, and its change is on the branch.
Without such a commit of the call's own there is no proof the patch ever ran, and a commit with
the call's change and more is not taken for the call.
"""

from __future__ import annotations

import hashlib
import uuid

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import FileRecord, Receipt, ReceiptError, records_of_plan
from applyonce.core.texts import success_text
from applyonce.errors import EXIT_COMMITTED, ApplyOnceError
from applyonce.flow.context import Context
from applyonce.flow.record import settle
from applyonce.flow.record.changes import CallArgs, plan_call
from applyonce.flow.record.lanes import candidate_args
from applyonce.flow.record.verify import UnknownOutcomeError
from applyonce.git.store import blob_id_of
from applyonce.state.ledger import EventKind, recorded_identity

FORGED = settle.FORGED


class ForgedCallIdError(UnknownOutcomeError):
    """A commit carries the call's Call-Id but not its change: the patch never ran here."""

    kind = "forged-call-id"
    default_hint = (
        "the patch did not run; inspect the commit with 'git show', then settle the call with "
        "'applyonce resolve' (and send the change again as a new attempt, --attempt)"
    )


def adopt_commit(
    ctx: Context,
    ident: CallIdentity,
    execution_id: str,
    ref: str,
    commit_id: str,
    prepared: Receipt | None,
    *,
    args: CallArgs | None = None,
    note: str | None = None,
    rewrite_of: str | None = None,
) -> Receipt:
    """Finish the bookkeeping of a call whose commit ``commit_id`` is already on ``ref``.

    The commit is the call's only if it carries the call's change (:func:`change_of_commit`,
    with ``args`` or the args the ledger recorded). A person's decision (``note``, from
    ``applyonce resolve``) adopts it as it is. ``rewrite_of``: the call's own commit, which
    ``commit_id`` rewrote (module docstring); the receipt's note then says so.

    Raises:
        ForgedCallIdError: it does not carry the call's change; the call is recorded unknown.
    """
    parent = ctx.store.parent_of(commit_id)
    replanned = None
    if note is None:
        try:
            replanned = change_of_commit(ctx, ident, ref, commit_id, args, rewrite_of=rewrite_of)
            if rewrite_of is not None:
                note = rewrite_note(ctx, rewrite_of, commit_id)
        except ForgedCallIdError:
            base = prepared.base_commit if prepared is not None else parent
            settle.mark_unknown(
                ctx, ident, ref, base, prepared, execution_id, [commit_id], kind="forged-call-id"
            )
            raise
    if replanned is not None:
        files, levels = replanned
    else:
        files, levels = _file_records_from_commit(ctx, parent, commit_id), {}
    receipt = Receipt.of_call(
        ident,
        status="committed",
        execution_id=execution_id,
        ref=ref,
        created_at=prepared.created_at if prepared else None,
        tool_call_id=ctx.store.trailers_of(commit_id).get("Tool-Call-Id"),
        base_commit=parent,
        commit=commit_id,
        files=files,
        match_levels=levels,
        reconciled=True,
        note=note,
        exit_code=EXIT_COMMITTED,
        remote=settle.published_to(ctx),
        signature=settle.signature_of(ctx, commit_id),
    ).with_output(success_text(files))
    sha = ctx.receipts.write(receipt)
    settle.record_settled(ctx, receipt, EventKind.RECONCILED, sha256=sha)
    return receipt


def confirm_adopted(ctx: Context, receipt: Receipt, args: CallArgs) -> None:
    """Before a committed receipt that was derived from its commit is returned again, check
    that commit with the args of the call at hand: it may have been adopted when no args were
    known (a lost ledger), or by a version that adopted any commit carrying the Call-Id.
    A person's decision (a receipt with a ``note``) stands.

    Raises:
        ForgedCallIdError: the commit does not carry the call's change; the call is now unknown.
    """
    if receipt.status != "committed" or not receipt.reconciled or receipt.note is not None:
        return
    assert receipt.commit is not None
    try:
        change_of_commit(ctx, receipt.identity, receipt.ref, receipt.commit, args)
    except ForgedCallIdError:
        settle.mark_unknown(
            ctx,
            receipt.identity,
            receipt.ref,
            receipt.base_commit,
            receipt,
            uuid.uuid4().hex,
            [receipt.commit],
            kind="forged-call-id",
        )
        raise


def with_the_change(
    ctx: Context, ident: CallIdentity, args: CallArgs, commits: list[str]
) -> list[str]:
    """The ``commits`` (found by the call's Call-Id) that carry the call's change."""
    found = []
    for commit in commits:
        try:
            change_of_commit(ctx, ident, args.ref, commit, args)
        except ForgedCallIdError:
            continue
        found.append(commit)
    return found


def carries_other_change(
    ctx: Context, call_id: str, ref: str, commit_id: str, receipt: Receipt | None
) -> bool:
    """Whether ``commit_id``, which carries ``call_id``'s trailer, is known not to carry the
    call's change (for audit; pure reads): the call was recorded unknown for it, or its
    receipt and ledger tell the call's args and its plan is not the commit's change.

    A commit applyonce published for the call (its receipt's own, not reconciled) is not
    planned again; one that nothing can be checked against (no record) is not judged here.
    """
    if receipt is not None and receipt.status == "unknown" and receipt.error:
        return receipt.error.get("kind") == "forged-call-id" and commit_id in receipt.error.get(
            "commits", ()
        )
    if receipt is not None and receipt.commit == commit_id and not receipt.reconciled:
        return False
    if receipt is not None and receipt.note is not None and receipt.commit == commit_id:
        return False  # a person decided it is the call's, or recover adopted it as a rewrite
    try:
        ident = receipt.identity if receipt is not None else recorded_identity(ctx.ledger, call_id)
    except ReceiptError:
        return False
    try:
        change_of_commit(
            ctx, ident, ref, commit_id, None, rewrite_of=own_commit(receipt, commit_id)
        )
    except ForgedCallIdError:
        return True
    return False


def own_commit(receipt: Receipt | None, commit_id: str) -> str | None:
    """The call's own commit that ``commit_id`` may be a user's rewrite of: the commit of its
    committed receipt, when that is another one (module docstring)."""
    if receipt is None or receipt.status != "committed" or receipt.commit in (None, commit_id):
        return None
    return receipt.commit


def paths_rewrite_adds(ctx: Context, own: str, rewrite: str) -> list[str]:
    """The paths ``rewrite`` changes (against its parent) that the call's own commit ``own``
    did not (against its own): the user's additions."""
    store = ctx.store
    ours = store.paths_changed(store.parent_of(own), own) if store.has_object(own) else set()
    return sorted(store.paths_changed(store.parent_of(rewrite), rewrite) - ours)


def rewrite_note(ctx: Context, own: str, rewrite: str) -> str:
    """The receipt's note for a call adopted from a user's rewrite of its commit."""
    added = paths_rewrite_adds(ctx, own, rewrite)
    return f"rewritten by the user (amend, rebase): commit {own[:12]} became {rewrite[:12]}" + (
        f", which also changes {_paths_text(added)}" if added else ""
    )


def _paths_text(paths: list[str], shown: int = 5) -> str:
    text = ", ".join(paths[:shown])
    return text + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


Replanned = tuple[tuple[FileRecord, ...], dict[str, list[str]]]


def change_of_commit(
    ctx: Context,
    ident: CallIdentity,
    ref: str,
    commit_id: str,
    args: CallArgs | None,
    *,
    rewrite_of: str | None = None,
) -> Replanned | None:
    """Whether ``commit_id`` carries the call's change, and if so the receipt's records.

    The commit must state the call's ``Args-Sha256``, and the call's plan applied to the
    commit's parent must give exactly the commit's tree: the same blob and mode at every path
    the plan writes, nothing at the paths it removes, and no other path changed — unless the
    commit is the user's rewrite of the call's own commit ``rewrite_of`` (module docstring),
    which may change other paths too. The plan is made
    from ``args`` (the call at hand) or the args the ledger recorded (its patch source first,
    which keeps what the args dump leaves out). Pure reads: nothing is staged again.

    Returns:
        The records the call's own process would have written; None when no args of the call
        are known anywhere (a lost ledger): then only the ``Args-Sha256`` trailer was checked.

    Raises:
        ForgedCallIdError: the commit does not carry the call's change.
    """
    forged = ForgedCallIdError(
        f"call {ident.call_id[:12]}'s outcome is unknown: {FORGED} (commit {commit_id[:12]})"
        if rewrite_of is None
        else f"call {ident.call_id[:12]}'s outcome is unknown: commit {commit_id[:12]} rewrote "
        f"its commit {rewrite_of[:12]} with another change to its files (changed by the user)",
        call_id=ident.call_id,
        commit=commit_id,
    )
    if ctx.store.trailers_of(commit_id).get("Args-Sha256") != ident.args_sha256:
        raise forged
    known = next((a for a in candidate_args(ctx, ident, ref, args) if a is not None), None)
    if known is None:
        return None
    parent = ctx.store.parent_of(commit_id)
    try:
        tree_plan = plan_call(ctx, known, parent, ctx.store.tree_at(parent))
    except ApplyOnceError:
        raise forged from None
    tree = ctx.store.tree_at(commit_id)
    blobs: dict[str, str] = {}
    for change in tree_plan.changes:
        if change.content is None:
            if tree.blob_id(change.path) is not None:
                raise forged
            continue
        expected = blob_id_of(change.content)
        if tree.version(change.path) != (expected, change.mode):
            raise forged
        blobs[change.path] = expected
    written = {c.path for c in tree_plan.changes if c.content is not None}
    if any(tree.blob_id(path) is not None for path in set(tree_plan.removed) - written):
        raise forged
    planned = {c.path for c in tree_plan.changes} | set(tree_plan.removed)
    if rewrite_of is None and not ctx.store.paths_changed(parent, commit_id) <= planned:
        raise forged
    return records_of_plan(tree_plan, blobs)


def _file_records_from_commit(
    ctx: Context, parent: str | None, commit_id: str
) -> tuple[FileRecord, ...]:
    tree = ctx.store.tree_at(commit_id)
    records: list[FileRecord] = []
    for change in ctx.store.changes_in(parent, commit_id):
        action = {"A": "add", "D": "delete", "R": "move"}.get(change.status, "update")
        blob = tree.blob_id(change.path)
        data = tree.read(change.path)[0] if blob else None
        records.append(
            FileRecord(
                path=change.path,
                action=action,
                **{"from": change.old_path if change.status == "R" else None},
                blob=blob,
                sha256=hashlib.sha256(data).hexdigest() if data is not None else None,
                mode=f"{change.mode:o}" if blob else None,
            )
        )
    return tuple(records)
