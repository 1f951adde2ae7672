"""After a call: bring the user's checkouts of the branch to its new tip, losing nothing.

One sync at a time per repository (``<state>/sync.lock``). A call whose paths hold the user's own
edits stays unsynced in the ledger, and ``applyonce recover`` reports it again.

With a remote as the commit point, other clones' calls move the remote's branch too: before a
call, :func:`catch_up` brings a checked-out local branch that lags the remote's up to it, as
``git pull --ff-only`` would (never over the user's edits or commits), so the checkout holds what
the call is staged on. The move is journaled (``<state>/catch-up.json``) until its files are
synced: ``recover`` finishes a catch-up cut short.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import orjson

from applyonce.core.receipt import Receipt, touched_paths_of
from applyonce.errors import ApplyOnceError
from applyonce.faults import fault
from applyonce.flow.context import Context
from applyonce.flow.dirty import sync_base
from applyonce.git.checkouts import SyncReport
from applyonce.git.publisher import LocalRefPublisher
from applyonce.state.files import atomic_write, ensure_dir, remove_file
from applyonce.state.ledger import Event, EventKind, RowChange
from applyonce.state.lockjournal import JOURNAL_DIR, remove_own_locks
from applyonce.state.locks import file_lock

SYNC_LOCK = "sync.lock"  # held by every sync, so around every Git lock applyonce takes
LOCK_JOURNAL = JOURNAL_DIR
CATCH_UP_FILE = "catch-up.json"  # a catch-up whose branch moved and whose files may not be synced


def lock_journal(ctx: Context) -> Path:
    """Where the Git locks applyonce takes in the user's repository are journaled."""
    return ctx.state_dir / LOCK_JOURNAL


def sync_many(ctx: Context, receipts: Sequence[Receipt]) -> list[SyncReport]:
    """Sync the paths of committed calls, in one pass per branch; record a ``synced`` event
    for each."""
    reports: list[SyncReport] = []
    by_ref: dict[str, list[Receipt]] = {}
    for receipt in receipts:
        by_ref.setdefault(receipt.ref, []).append(receipt)
    ensure_dir(ctx.state_dir)
    with file_lock(ctx.state_dir / SYNC_LOCK):
        clear_dead_syncs(ctx)
        for ref, group in by_ref.items():
            paths: dict[str, None] = {}
            for receipt in group:
                for record in receipt.files:
                    paths[record.path] = None
                    if record.from_:
                        paths[record.from_] = None
            ctx.publisher.follow(ref, {r.commit for r in group if r.commit is not None})
            checkouts = ctx.checkouts.checkouts_of(ref)
            ref_reports = []
            if checkouts:  # none (a bare repository, another branch checked out): synced
                pending = {row.base_commit for row in ctx.ledger.unsynced(ref)}
                bases = [sync_base(ctx, r) for r in group] + sorted(
                    b for b in pending if b is not None
                )
                since = _oldest_base(ctx, ref, bases)
                ref_reports = ctx.checkouts.sync_checkouts(
                    ref, since, list(paths), journal=lock_journal(ctx), checkouts=checkouts
                )
            reports.extend(ref_reports)
            detail = {"reports": [r.__dict__ for r in ref_reports]}
            left = {p for report in ref_reports for p in report.left_alone}
            ctx.ledger.record(
                *(
                    Event(
                        r.call_id,
                        r.execution_id,
                        EventKind.SYNCED,
                        RowChange(synced=not touched_paths_of(r) & left),
                        detail,
                    )
                    for r in group
                )
            )
    return reports


def clear_dead_syncs(ctx: Context) -> None:
    """Remove what killed syncs left (their journaled ``index.lock``, their temp files), as
    ``recover`` does. Called with the sync lock held: every sync holds it throughout, so every
    holder the journal names is dead. Without this, each later call in a clone whose sync was
    killed waited for that lock in vain, and left its checkout for ``recover``."""
    journal = lock_journal(ctx)
    if journal.is_dir():
        remove_own_locks(journal, holders_dead=True)


def sync_after_publish(ctx: Context, receipt: Receipt) -> list[SyncReport]:
    """Sync after a publish: the call has taken effect, so a sync failure is a warning (left for
    'applyonce recover'), never a failure of the call."""
    try:
        return sync_many(ctx, [receipt])
    except (ApplyOnceError, OSError) as exc:
        reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
        return [SyncReport(None, (), (), failed=reason)]


def sync_warnings(reports: Sequence[SyncReport]) -> list[str]:
    """What the user is told about a sync that did not do everything (one line each)."""
    lines = []
    for report in reports:
        if report.failed:
            lines.append(
                f"committed, but the checkout was not updated ({report.failed}); "
                "run 'applyonce recover' to update it"
            )
        lines.extend(
            f"{path} in {report.worktree} has your changes; left it as it is"
            for path in report.left_alone
        )
    return lines


def _oldest_base(ctx: Context, ref: str, bases: Sequence[str | None]) -> str | None:
    """The oldest of ``bases`` on ``ref``: the checkout may hold any version of a path from
    there on. None if a call started on an unborn branch. A single base is the answer as it is;
    several (``recover`` settling many calls) take one walk from the tip that stops at the last
    of them, whatever their number: never the history below. Bases not on ``ref`` (rewritten
    away) do not count, unless none is on it (then the first)."""
    if any(base is None for base in bases):
        return None
    unique = [b for b in dict.fromkeys(bases) if b is not None]
    if len(unique) <= 1:
        return unique[0] if unique else None
    return ctx.store.oldest_on(ctx.publisher.tip(ref), unique) or unique[0]


def catch_up(ctx: Context, ref: str, to: str | None) -> list[SyncReport]:
    """With a remote commit point: move a checked-out local ``ref`` that lags the remote's (its
    tip is an ancestor of ``to``, the remote tip a call is staged on) to ``to``, and sync the
    paths the commits in between change, as ``git pull --ff-only`` would. Nothing happens when
    the local branch has commits of the user's own, when no work tree has it checked out (the
    publisher's ``follow`` moves such a branch), or when the checkout holds the user's edits on
    one of those paths (the call then finds them, as before).

    The move is journaled first, so a crash before the files are synced is finished by
    ``recover`` (:func:`resume_catch_up`)."""
    if ctx.remote is None:
        return []
    ensure_dir(ctx.state_dir)
    with file_lock(ctx.state_dir / SYNC_LOCK):
        clear_dead_syncs(ctx)
        resume_catch_up(ctx, locked=True)
        remote_tip, local = to, ctx.store.tip(ref)
        if remote_tip is None or local is None or local == remote_tip:
            return []
        if not ctx.store.is_ancestor(local, remote_tip):
            return []  # the user's own commits are on it: theirs to merge
        checkouts = ctx.checkouts.checkouts_of(ref)
        if not checkouts:
            return []
        paths = sorted(ctx.store.paths_changed(local, remote_tip))
        if ctx.checkouts.dirty_paths(ref, ctx.store.tree_at(local), paths):
            return []
        journal = ctx.state_dir / CATCH_UP_FILE
        atomic_write(journal, orjson.dumps({"ref": ref, "from": local, "to": remote_tip}))
        assert ctx.index is not None  # open_context makes one
        LocalRefPublisher(ctx.store, ctx.index, lock_journal(ctx)).publish(
            ref, local, remote_tip, reason=f"applyonce: follow {ctx.remote}"
        )
        fault("during-catch-up")
        reports = ctx.checkouts.sync_checkouts(
            ref, local, paths, journal=lock_journal(ctx), checkouts=checkouts
        )
        if not any(r.failed for r in reports):
            remove_file(journal, durable=True)
        return reports


def resume_catch_up(ctx: Context, *, locked: bool = False) -> list[SyncReport]:
    """Finish a catch-up cut short (its branch moved, its files maybe not synced): sync the
    paths changed since where the branch was, then forget it. ``locked``: the sync lock is held
    already."""
    journal = ctx.state_dir / CATCH_UP_FILE
    if not journal.exists():
        return []
    if not locked:
        ensure_dir(ctx.state_dir)
        with file_lock(ctx.state_dir / SYNC_LOCK):
            return resume_catch_up(ctx, locked=True)
    try:
        entry = orjson.loads(journal.read_bytes())
        ref, start = str(entry["ref"]), str(entry["from"])
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError):
        remove_file(journal, durable=True)  # ours, and unreadable: nothing left to finish
        return []
    tip = ctx.store.tip(ref)
    reports: list[SyncReport] = []
    with contextlib.suppress(KeyError, ValueError):
        if tip is not None and ctx.store.has_object(start) and ctx.store.is_ancestor(start, tip):
            reports = ctx.checkouts.sync_checkouts(
                ref, start, sorted(ctx.store.paths_changed(start, tip)), journal=lock_journal(ctx)
            )
    if not any(r.failed for r in reports):
        remove_file(journal, durable=True)
    return reports
