"""A receipt read back is untrusted until Git agrees with it (docs/design.md §4)."""

from __future__ import annotations

import contextlib
import hashlib

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import Receipt, ReceiptError
from applyonce.core.trailers import Trailers
from applyonce.errors import ApplyOnceError, ConflictError, StateError
from applyonce.flow.context import Context
from applyonce.state.ledger import CallRow, KeyReusedError


class UnknownOutcomeError(StateError):
    kind = "unknown-outcome"
    default_hint = (
        "run 'applyonce recover' to record it, then 'applyonce show' it and 'applyonce resolve' it"
    )


class NotPushedError(ConflictError):
    """A call committed to this repository's own branch (without ``--remote``), repeated with a
    remote as the commit point whose branch does not have that commit: it was never pushed."""

    kind = "not-pushed"
    default_retryable = True


def unpushed(ctx: Context, ref: str, commit: str, *, published_to: str | None) -> bool:
    """Whether ``commit``, not on the remote's ``ref``, is on this repository's own ``ref``:
    a call made here without ``--remote`` and not pushed since (never a reset or rewrite).
    ``published_to``: the remote the call's receipt says it was published to; a call published
    to a remote whose branch no longer has it was reset or rewritten there, never "not pushed"
    (pushing this repository's branch would undo that)."""
    if ctx.remote is None or published_to is not None:
        return False
    local = ctx.store.tip(ref)
    return (
        local is not None and ctx.store.has_object(commit) and ctx.store.is_ancestor(commit, local)
    )


def push_hint(ctx: Context, ref: str, then: str) -> str:
    """What makes the remote's ``ref`` hold this repository's commits: the push, then ``then``."""
    return f"push it ('git push {ctx.remote} {ref.removeprefix('refs/heads/')}'), then {then}"


def verify_against_git(ctx: Context, receipt: Receipt, *, trailers: Trailers | None = None) -> None:
    """A committed receipt must name a commit carrying its Call-Id, with its files' blobs
    (``trailers``: the commit's, when the caller has just read them).

    Raises:
        ReceiptError: it does not.
    """
    short = receipt.call_id[:12]
    store = ctx.store
    if receipt.commit is not None and not store.has_object(receipt.commit):
        # With a shared ledger, another clone's call: its commit is on the remote's branch, not
        # fetched here yet. Asking the publisher fetches that branch (a local one: a no-op).
        with contextlib.suppress(ApplyOnceError):
            ctx.publisher.is_on(receipt.ref, receipt.commit)
    if receipt.commit is None or not store.has_object(receipt.commit):
        raise ReceiptError(f"receipt {short}: its commit is not in the repository")
    if trailers is None:
        trailers = store.trailers_of(receipt.commit)
    if receipt.call_id not in trailers.all("Call-Id"):
        raise ReceiptError(f"receipt {short}: commit {receipt.commit[:12]} has another Call-Id")
    # Every committed receipt is written with its commit's parent as its base (the sync of the
    # checkouts starts from it): another base is an edited receipt.
    if store.parent_of(receipt.commit) != receipt.base_commit:
        raise ReceiptError(
            f"receipt {short}: its base commit is not the parent of commit {receipt.commit[:12]}"
        )
    tree = store.tree_at(receipt.commit)
    for record in receipt.files:
        if tree.blob_id(record.path) != record.blob:
            raise ReceiptError(
                f"receipt {short}: {record.path} does not match commit {receipt.commit[:12]}",
                path=record.path,
            )
        if record.blob is not None:
            data = tree.blob_data(record.blob)
            if hashlib.sha256(data).hexdigest() != record.sha256:
                raise ReceiptError(f"receipt {short}: {record.path} has a forged sha256")


def stored_receipt(ctx: Context, call_id: str, *, row: CallRow | None = None) -> Receipt:
    """The verified receipt of ``call_id`` (against the ledger's digest, and Git if committed);
    ``row``: its ledger row, when the caller has just read it (else it is read here).

    Raises:
        ReceiptError: it is missing or does not verify.
    """
    if row is None or row.call_id != call_id:
        row = ctx.ledger.get(call_id)
    receipt = ctx.receipts.load(call_id, expected_sha256=row.receipt_sha256 if row else None)
    if receipt is None:
        raise ReceiptError(f"receipt {call_id[:12]} is missing", call_id=call_id)
    if receipt.status == "committed":
        verify_against_git(ctx, receipt)
    return receipt


def check_still_on_branch(ctx: Context, receipt: Receipt) -> None:
    """A committed call whose commit the branch no longer has did not 'succeed' any more: saying
    so beats returning a success the repository contradicts.

    Raises:
        UnknownOutcomeError: the commit is gone from the branch.
    """
    if receipt.commit is None or receipt.status != "committed":
        return
    if not ctx.publisher.is_on(receipt.ref, receipt.commit):
        landed = ctx.publisher.landed(receipt.ref, receipt.call_id)
        if landed:
            # The user rewrote the commit (amend, rebase): its change may well be on the branch,
            # and sending the call again as a new attempt would apply it twice.
            raise UnknownOutcomeError(
                f"call {receipt.call_id[:12]} was committed as {receipt.commit[:12]}, which is "
                f"no longer on {receipt.ref}; commit {landed[0][:12]} there carries its Call-Id "
                "(rewritten by the user: amend, rebase)",
                call_id=receipt.call_id,
                hint="run 'applyonce recover' to record it, then repeat the call",
            )
        if unpushed(ctx, receipt.ref, receipt.commit, published_to=receipt.remote):
            branch = receipt.ref.removeprefix("refs/heads/")
            raise NotPushedError(
                f"call {receipt.call_id[:12]} was committed as {receipt.commit[:12]} on this "
                f"repository's {branch}, and remote {ctx.remote}'s {branch} does not have it "
                "(it was not pushed)",
                call_id=receipt.call_id,
                hint=push_hint(ctx, receipt.ref, "repeat the call"),
            )
        raise UnknownOutcomeError(
            f"call {receipt.call_id[:12]} was committed as {receipt.commit[:12]}, which is "
            f"no longer on {receipt.ref} (the branch was reset or rewritten)",
            call_id=receipt.call_id,
            hint="if the change is still wanted, send it again as a new attempt (--attempt)",
        )


def check_same_args(ctx: Context, ident: CallIdentity, commit_id: str | None) -> None:
    """A key-mode call found in Git must be the same change, or the key was reused.

    Raises:
        KeyReusedError: the commit records other arguments.
    """
    if ident.idempotency_key is None or commit_id is None:
        return
    recorded = ctx.store.trailers_of(commit_id).get("Args-Sha256")
    if recorded is not None and recorded != ident.args_sha256:
        raise KeyReusedError(
            f"idempotency key {ident.idempotency_key!r} was already used for commit "
            f"{commit_id[:12]} with other arguments",
            call_id=ident.call_id,
        )
