"""Adopting a commit: the record of a call whose commit is already on the branch.

Used wherever Git says a call landed but its record does not say so yet (a takeover, recovery,
repair, resolve, a lost race against another execution of the same call). Nothing is staged or
published again: the receipt is derived from the commit.
"""

from __future__ import annotations

import hashlib
from typing import cast

from applyonce.core.identity import ApplyPatchArgs, CallIdentity, source_text
from applyonce.core.plan import plan
from applyonce.core.receipt import FileRecord, Receipt, records_of_plan
from applyonce.core.texts import success_text
from applyonce.errors import EXIT_COMMITTED, ApplyOnceError
from applyonce.flow.context import Context
from applyonce.flow.settle import record_settled
from applyonce.git.store import blob_id_of
from applyonce.patch import PatchFormat, parse
from applyonce.patch.limits import UNCAPPED
from applyonce.state.ledger import EventKind, claimed_data


def adopt_commit(
    ctx: Context,
    ident: CallIdentity,
    execution_id: str,
    ref: str,
    commit_id: str,
    prepared: Receipt | None,
    *,
    note: str | None = None,
) -> Receipt:
    """Finish the bookkeeping of a call whose commit ``commit_id`` is already on ``ref``."""
    parent = ctx.store.parent_of(commit_id)
    replanned = _replan(ctx, ident, ref, parent, commit_id)
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
    ).with_output(success_text(files))
    sha = ctx.receipts.write(receipt)
    record_settled(ctx, receipt, EventKind.RECONCILED, sha256=sha)
    return receipt


def _replan(
    ctx: Context, ident: CallIdentity, ref: str, parent: str | None, commit_id: str
) -> tuple[tuple[FileRecord, ...], dict[str, list[str]]] | None:
    """Re-derive the records the interrupted process would have written: plan the call's
    recorded args on the commit's parent, and accept the result only if every path's blob
    equals the commit's. Pure reads: nothing is staged again."""
    source = claimed_data(ctx.ledger, ident.call_id, "source")
    data = claimed_data(ctx.ledger, ident.call_id, "args")
    try:
        if source is not None:
            # The call passed the caps when it ran; its own record is re-read whatever they are now.
            text = source_text(source)
            patch = parse(text, cast(PatchFormat, source["format"]), limits=UNCAPPED)
            args = ApplyPatchArgs.from_patch(patch, ref=ref, repo_root=ctx.repo_root)
        elif data is not None:
            args = ApplyPatchArgs.model_validate(data)
        else:
            return None
        if args.sha256() != ident.args_sha256:
            return None
        tree_plan = plan(args.patch(), ctx.store.tree_at(parent))
    except (ApplyOnceError, ValueError, KeyError):
        return None
    tree = ctx.store.tree_at(commit_id)
    blobs: dict[str, str] = {}
    for change in tree_plan.changes:
        expected = None if change.content is None else blob_id_of(change.content)
        if tree.blob_id(change.path) != expected:
            return None
        if expected is not None:
            blobs[change.path] = expected
    if any(tree.blob_id(path) is not None for path in tree_plan.removed):
        return None
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
