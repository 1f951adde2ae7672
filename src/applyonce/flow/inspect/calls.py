"""Inspecting the record: finding a call by a prefix of its ID, showing its verified receipt,
listing the calls (``applyonce show`` and ``applyonce log``)."""

from __future__ import annotations

import contextlib
from typing import Any

from pydantic import BaseModel, ConfigDict

from applyonce.core.receipt import Receipt, ReceiptError
from applyonce.errors import UsageError
from applyonce.flow.checkouts.sync import behind_of
from applyonce.flow.context import Context
from applyonce.flow.options import CheckoutBehind, PlanView
from applyonce.flow.record.verify import verify_against_git
from applyonce.git.checkouts import SyncReport
from applyonce.git.diffs import CallDiff, commit_diff, plan_diff
from applyonce.state.ledger import CallRow, EventKind

MIN_PREFIX = 6


class CallSummary(BaseModel):
    """One line of ``applyonce log``: a call as the ledger has it."""

    # Built by the first listing ('applyonce log'), not when applyonce starts.
    model_config = ConfigDict(frozen=True, defer_build=True)

    call_id: str
    state: str
    ref: str
    commit: str | None
    exit_code: int | None
    retryable: bool
    synced: bool
    updated_at: str

    @classmethod
    def of_row(cls, row: CallRow) -> CallSummary:
        return cls(
            call_id=row.call_id,
            state=row.state,
            ref=row.ref,
            commit=row.commit_id,
            exit_code=row.exit_code,
            retryable=row.retryable,
            synced=row.synced,
            updated_at=row.updated_at,
        )


def find_call_id(ctx: Context, prefix: str) -> str:
    """The one call whose ID starts with ``prefix`` (6 or more hex digits).

    Raises:
        UsageError: too short, no such call, or more than one.
    """
    prefix = prefix.strip().lower()
    if len(prefix) < MIN_PREFIX:
        raise UsageError(f"give at least {MIN_PREFIX} characters of the call ID")
    matches = [c for c in ctx.receipts.call_ids() if c.startswith(prefix)]
    if not matches:
        raise UsageError(
            f"no call {prefix!r} in this repository", hint="list calls with 'applyonce log'"
        )
    if len(matches) > 1:
        raise UsageError(f"{prefix!r} matches {len(matches)} calls", hint="give more characters")
    return matches[0]


def show(ctx: Context, call_id: str) -> Receipt:
    """The receipt of ``call_id``, verified against the ledger and (if committed) Git.

    Raises:
        UsageError: there is no receipt.
        ReceiptError: it does not verify.
    """
    row = ctx.ledger.get(call_id)
    receipt = ctx.receipts.load(call_id, expected_sha256=row.receipt_sha256 if row else None)
    if receipt is None:
        raise UsageError(f"no receipt for call {call_id[:12]}")
    if receipt.status == "committed":
        verify_against_git(ctx, receipt)
    return receipt


def checkout_behind(ctx: Context, receipt: Receipt) -> list[CheckoutBehind]:
    """Whether the checkout of a committed call's branch does not show its commit (the ledger
    has no ``synced`` event saying it does): what its last sync found, and what brings it in
    line. Empty: it shows it, or the call did not commit."""
    if receipt.status != "committed":
        return []
    row = ctx.ledger.get(receipt.call_id)
    if row is None or row.synced:
        return []
    synced = [e for e in ctx.ledger.events(receipt.call_id) if e.kind == EventKind.SYNCED]
    reports: list[SyncReport] = []
    with contextlib.suppress(TypeError, ValueError, AttributeError, KeyError):
        for found in synced[-1].data.get("reports", []) if synced else []:
            reports.append(_report_of(found))
    notes = behind_of(ctx, receipt.ref, reports)
    if notes:
        return notes
    branch = receipt.ref.removeprefix("refs/heads/")
    return [
        CheckoutBehind(
            None,
            branch,
            (),
            "the checkout sync after its commit did not finish",
            "applyonce recover",
        )
    ]


def _report_of(found: dict[str, Any]) -> SyncReport:
    """A sync report as a ``synced`` event's data records it (recorded before ``behind`` was:
    every path left alone, as the call was then judged by them)."""
    left = tuple(str(p) for p in found.get("left_alone") or ())
    return SyncReport(
        worktree=found.get("worktree"),
        written=tuple(str(p) for p in found.get("written") or ()),
        left_alone=left,
        failed=found.get("failed"),
        behind=tuple(str(p) for p in found["behind"] or ()) if "behind" in found else left,
        unfollowed=found.get("unfollowed"),
        since=found.get("since"),
        diverged=bool(found.get("diverged")),
    )


def diff_of(ctx: Context, receipt: Receipt) -> CallDiff | None:
    """The unified diff of a committed call: its commit against the commit's parent, for the
    call's paths only (None: the call has no commit, so it changed nothing)."""
    if receipt.status != "committed" or receipt.commit is None:
        return None
    files = [(f.path, f.action, f.from_) for f in receipt.files]
    return commit_diff(ctx.store, receipt.commit, files)


def diff_of_plan(ctx: Context, view: PlanView) -> CallDiff:
    """The unified diff a dry run's plan would commit on its base (nothing is written)."""
    return plan_diff(ctx.store, view.base_commit, view.plan)


def calls(ctx: Context) -> list[CallSummary]:
    """Every call in the ledger, oldest first."""
    return [CallSummary.of_row(row) for row in ctx.ledger.calls()]


def call_ids(ctx: Context) -> list[str]:
    """The IDs of every call with a receipt, sorted."""
    return ctx.receipts.call_ids()


def latest_with_tool_call_id(ctx: Context, tool_call_id: str) -> str | None:
    """The latest call recorded under the model's ``tool_call_id`` (receipts that do not verify
    are passed over)."""
    found: list[tuple[str, str]] = []
    for call_id in ctx.receipts.call_ids():
        try:
            receipt = ctx.receipts.load(call_id)
        except ReceiptError:
            continue
        if receipt is not None and receipt.tool_call_id == tool_call_id:
            found.append((receipt.updated_at, call_id))
    return max(found)[1] if found else None
