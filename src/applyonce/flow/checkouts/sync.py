"""After a call: bring the user's checkouts of the branch to its new tip, losing nothing; before
one: bring them up to what it is staged on.

One sync at a time per repository (``<state>/sync.lock``). A sync brings a checkout from whatever
it may still show (:mod:`applyonce.flow.checkouts.lag`: the branch may have moved without it) to the
tip, as ``git merge --ff-only`` would: only the paths that hold a version the branch had, in the
work tree and the index, never the user's edits. A call whose checkout does not show its commit
after that (the user's git held ``index.lock``, a path held the user's edits, the branch here did
not follow the remote's) stays unsynced in the ledger: the call says so (:class:`CheckoutBehind`),
and ``applyonce recover`` and ``applyonce show`` report it again. A repeat of a committed call
syncs too, its sync recorded as done or not (:func:`sync_many` with ``record=False``): in a ledger
that clones share, the record may be another clone's. Each such report comes with commands that
keep the user's changes (:func:`behind_of`), never ones that take the branch's version over them.

While a branch moves — a call's publish, the local branch following a remote's, a roll forward
— and until the sync has written their indexes, its checkouts are held (:func:`holding_checkouts`:
the sync lock, and each checkout's ``index.lock``), as git holds ``index.lock`` while it moves a
branch and writes the index that goes with it. Without that, a ``git commit`` of the user's that
started in between read the new tip, found the index still holding the files as they were, and
committed them: the call undone, silently. A checkout whose ``index.lock`` another git holds
(one that read the tip before the move: its own move of the branch then fails) is not waited for
long: the branch moves, and the sync takes that lock afterwards, or says the checkout is behind.

Before a call, :func:`catch_up` brings the checkouts up to the branch's tip the same way, so that
no file of the branch's own is taken for an edit of the user's (and committed back by ``--dirty
commit``, undoing the commits in between). With a remote as the commit point, other clones'
calls move the remote's branch too: a checked-out local branch that lags the remote's is moved up
to it, as ``git pull --ff-only`` would (never over the user's edits or commits). The move is
journaled (``<state>/catch-up.json``) until its files are synced: ``recover`` finishes a catch-up
cut short. A checkout that shows no commit of a branch that has some is refused
(:class:`UnshownBranchError`): a sync of the call's paths alone would leave every other file of the
branch as a staged deletion there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from applyonce.core.receipt import Receipt, touched_paths_of
from applyonce.errors import ApplyOnceError, ConflictError
from applyonce.faults import fault
from applyonce.flow.checkouts.dirty import is_snapshot_of, sync_base
from applyonce.flow.checkouts.lag import note_followed, paths_to_bring, shown_by_checkouts
from applyonce.flow.context import LEDGER_FILE, Context
from applyonce.flow.options import CheckoutBehind
from applyonce.git.checkouts import HeldIndexes, SyncReport, keep_edits_command, pull_command
from applyonce.git.publisher import LocalRefPublisher
from applyonce.state.files import atomic_write, ensure_dir, remove_file
from applyonce.state.ledger import Event, EventKind, RowChange
from applyonce.state.lockjournal import JOURNAL_DIR, remove_own_locks
from applyonce.state.locks import file_lock

# Held by every sync, and across every move of a branch that has checkouts until they are synced
# (holding_checkouts): so around every index.lock applyonce takes.
SYNC_LOCK = "sync.lock"
LOCK_JOURNAL = JOURNAL_DIR
CATCH_UP_FILE = "catch-up.json"  # a catch-up whose branch moved and whose files may not be synced
# How long, before a branch moves, the index.lock of each of its checkouts is waited for: the
# user's git holds it for milliseconds. One still held then is the sync's to take, after the move.
HOLD_WAIT_S = 1.0


class UnshownBranchError(ConflictError):
    """A checkout of the branch shows none of its commits (unborn there, or an empty index)."""

    kind = "checkout-unborn"
    default_retryable = True


def lock_journal(ctx: Context) -> Path:
    """Where the Git locks applyonce takes in the user's repository are journaled."""
    return ctx.state_dir / LOCK_JOURNAL


@dataclass(frozen=True)
class Held:
    """The checkouts of ``ref`` held by :func:`holding_checkouts`: the sync lock, and the
    ``index.lock`` of each checkout that could be taken (``indexes``)."""

    ref: str
    indexes: HeldIndexes


@contextlib.contextmanager
def holding_checkouts(
    ctx: Context, ref: str, paths: Sequence[str], *, locked: bool = False
) -> Iterator[Held | None]:
    """Hold the checkouts of ``ref`` for the block: the sync lock (``locked``: the caller holds
    it already) and each checkout's ``index.lock``, taken within :data:`HOLD_WAIT_S` or left to
    the sync (see the module docstring). For a move of the branch and the sync that follows it,
    which uses the held locks (``held=`` of :func:`sync_many`, :func:`bring_up`). ``paths``:
    the work-tree files the sync may write. Yields None where the branch has no checkout (then
    nothing is held).

    Raises:
        LockBusyError: another applyonce kept the sync lock for the whole bounded wait.
    """
    checkouts = ctx.checkouts.checkouts_of(ref)
    if not checkouts:
        yield None
        return
    with contextlib.ExitStack() as stack:
        if not locked:
            ensure_dir(ctx.state_dir)
            stack.enter_context(file_lock(ctx.state_dir / SYNC_LOCK))
            clear_dead_syncs(ctx)
        indexes = stack.enter_context(
            ctx.checkouts.holding(
                ref, paths, journal=lock_journal(ctx), wait=HOLD_WAIT_S, checkouts=checkouts
            )
        )
        yield Held(ref, indexes)


def publishing(
    ctx: Context, ref: str, paths: Sequence[str]
) -> contextlib.AbstractContextManager[Held | None]:
    """Around the publish of a call on ``ref`` (``paths``: those it writes) and the sync after
    it: with the repository's own branch as the commit point, the publish moves the branch, so
    its checkouts are held (:func:`holding_checkouts`). With a remote, nothing is: the remote's
    branch moves, and the local one follows in the sync, under the hold :func:`sync_many`
    takes."""
    if ctx.remote is not None:
        return contextlib.nullcontext()
    return holding_checkouts(ctx, ref, paths)


def bring_up(
    ctx: Context,
    ref: str,
    *,
    extra: Sequence[str | None] = (),
    checkouts: Sequence[Any] | None = None,
    held: Held | None = None,
) -> list[SyncReport]:
    """Bring every checkout of ``ref`` (``checkouts``, if the caller has them; ``held``: held
    by :func:`holding_checkouts`) from whatever it may still show (``extra``: commits the
    caller knows it may, see :func:`applyonce.flow.checkouts.lag.shown_by_checkouts`) to the
    branch's tip, as ``git merge --ff-only`` would; note that they show it when they all do. Called
    with the sync lock held; asks the ledger only where the branch has a checkout.

    Raises:
        ApplyOnceError: the index stays locked, a filter fails, git fails (nothing is lost).
    """
    indexes = held.indexes if held is not None and held.ref == ref else None
    if indexes is not None:
        checkouts = indexes.checkouts
    elif checkouts is None:
        checkouts = ctx.checkouts.checkouts_of(ref)
    tip = ctx.store.tip(ref)
    if not checkouts or tip is None:
        return []
    shown = shown_by_checkouts(ctx, ref, tip, extra=extra, checkouts=checkouts)
    if not shown.lags(tip):
        return []
    # Fast-forward only: a file that holds the version of a commit the branch moved away from
    # (back, or to another line) is left as it is, and reported, as git would leave it.
    reports = ctx.checkouts.sync_checkouts(
        ref,
        shown.since,
        paths_to_bring(ctx, shown, tip),
        journal=lock_journal(ctx),
        checkouts=checkouts,
        held=indexes,
    )
    if all(r.shows_tip for r in reports):
        note_followed(ctx, ref, tip)
    return reports


def sync_many(
    ctx: Context,
    receipts: Sequence[Receipt],
    *,
    held: Held | None = None,
    record: bool = True,
) -> list[SyncReport]:
    """Bring the checkouts of the committed calls' branches to their tips (one pass per branch);
    with a remote as the commit point, move a checked-out branch that lags the remote's up to
    it first, as a new call would (:func:`catch_up`); record a ``synced`` event for each call:
    synced when every checkout shows its commit. ``held``: the checkouts of a branch held since
    it moved (:func:`publishing`), with the sync lock; the others are held here before a local
    branch follows a remote's. ``record``: False to record nothing (a call replayed whose sync
    is recorded already: its record may be another clone's, in a ledger the clones share, and
    this clone's checkouts are judged by what they show)."""
    reports: list[SyncReport] = []
    by_ref: dict[str, list[Receipt]] = {}
    for receipt in receipts:
        by_ref.setdefault(receipt.ref, []).append(receipt)
    with contextlib.ExitStack() as stack:
        if held is None:
            ensure_dir(ctx.state_dir)
            stack.enter_context(file_lock(ctx.state_dir / SYNC_LOCK))
            clear_dead_syncs(ctx)
        for ref, group in by_ref.items():
            ref_reports, unfollowed = _sync_branch(ctx, ref, group, held)
            reports.extend(ref_reports)
            if not record:
                continue
            detail = {"reports": [r.__dict__ for r in ref_reports]}
            behind = {p for report in ref_reports for p in report.behind}
            failed = any(r.failed for r in ref_reports)
            ctx.ledger.record(
                *(
                    Event(
                        r.call_id,
                        r.execution_id,
                        EventKind.SYNCED,
                        RowChange(
                            synced=not (
                                failed or touched_paths_of(r) & behind or r.call_id in unfollowed
                            )
                        ),
                        detail,
                    )
                    for r in group
                )
            )
    return reports


def _sync_branch(
    ctx: Context, ref: str, group: Sequence[Receipt], held: Held | None
) -> tuple[list[SyncReport], set[str]]:
    """:func:`sync_many` for the calls of ``group``, all on ``ref``, with the sync lock held:
    their branch here follows a remote's, and its checkouts are synced, held throughout
    (``held``, or held here); with a remote, the branch then follows the remote's further, to
    other clones' commits, as before a new call. Returns the reports, and the calls whose commit
    the branch here does not hold (it did not follow the remote's)."""
    own_hold = held is None or held.ref != ref
    hold: contextlib.AbstractContextManager[Held | None]
    if own_hold:
        paths = sorted({p for r in group for p in touched_paths_of(r)})
        hold = holding_checkouts(ctx, ref, paths, locked=True)
    else:
        hold = contextlib.nullcontext(held)
    with hold as holds:
        checkouts = holds.indexes.checkouts if holds is not None else []
        # A checkout of a branch unborn here shows none of the remote's files: its branch is
        # not moved to them (each would stay a staged deletion there; the next call refuses,
        # and says to pull), unless the calls made the branch from nothing (staged on it
        # unborn): the sync then brings all of its files.
        if (
            ctx.store.tip(ref) is not None
            or not checkouts
            or all(r.base_commit is None for r in group)
        ):
            ctx.publisher.follow(ref, _commits_of(ctx, group))
        if not checkouts:  # none (bare, another branch checked out): synced
            return [], set()
        extra = _bases_on_branch(ctx, ref, group)
        reports = bring_up(ctx, ref, extra=extra, held=holds)
    if ctx.remote is not None and own_hold:
        # Other clones' commits on the remote's branch too (held anew: the hold above is over).
        local, to = ctx.store.tip(ref), ctx.publisher.tip(ref)
        reports += _follow_remote(ctx, ref, local, to, reports)
    unfollowed = _not_on_branch(ctx, ref, group)
    if unfollowed:
        reports.append(_unfollowed(ctx, ref))
    return reports, unfollowed


def _unfollowed(ctx: Context, ref: str) -> SyncReport:
    """The report of a branch here that did not follow the remote's to a call's commit: why
    (the user's own commits on it, or their changes in the way)."""
    local = ctx.store.tip(ref)
    fetched = ctx.publisher.tip(ref)
    diverged = (
        local is not None
        and fetched is not None
        and ctx.store.has_object(fetched)
        and not ctx.store.is_ancestor(local, fetched)
    )
    return SyncReport(None, unfollowed=ref.removeprefix("refs/heads/"), diverged=diverged)


def _commits_of(ctx: Context, group: Sequence[Receipt]) -> set[str]:
    """The commits the calls of ``group`` made: each one's own, and the snapshot of the user's
    changes below it (``--dirty commit``), which the branch here passes over too."""
    commits = {r.commit for r in group if r.commit is not None}
    commits |= {
        r.base_commit
        for r in group
        if r.base_commit is not None and is_snapshot_of(ctx, r.base_commit, r.call_id)
    }
    return commits


def _bases_on_branch(ctx: Context, ref: str, group: Sequence[Receipt]) -> list[str | None]:
    """Where the checkouts were before the calls of ``group``: their bases (None: made on the
    unborn branch, from nothing); with a remote, those the branch here holds (a call staged
    past the local branch was never shown here)."""
    bases = [sync_base(ctx, r) for r in group]
    if ctx.remote is None:
        return bases
    local = ctx.store.tip(ref)
    return [
        base
        for base in bases
        if base is None
        or (local is not None and ctx.store.is_commit(base) and ctx.store.is_ancestor(base, local))
    ]


def _not_on_branch(ctx: Context, ref: str, group: Sequence[Receipt]) -> set[str]:
    """With a remote as the commit point: the calls whose commit the local branch (which its
    checkouts show) does not hold, because it did not follow the remote's."""
    if ctx.remote is None:
        return set()
    local = ctx.store.tip(ref)
    return {
        r.call_id
        for r in group
        if r.commit is not None
        and (
            local is None
            or not ctx.store.has_object(r.commit)
            or not ctx.store.is_ancestor(r.commit, local)
        )
    }


def clear_dead_syncs(ctx: Context) -> None:
    """Remove what killed syncs left (their journaled ``index.lock``, their temp files), as
    ``recover`` does. Called with the sync lock held: every holder of an ``index.lock`` holds it
    throughout (a sync; a publish and its sync, :func:`holding_checkouts`), so every
    holder the journal names is dead. Without this, each later call in a clone whose sync was
    killed waited for that lock in vain, and left its checkout for ``recover``."""
    journal = lock_journal(ctx)
    if journal.is_dir():
        remove_own_locks(journal, holders_dead=True)


def sync_after_publish(
    ctx: Context, receipt: Receipt, *, held: Held | None = None, record: bool = True
) -> list[SyncReport]:
    """Sync after a publish (``held``: the checkouts held since, :func:`publishing`): the call
    has taken effect, so a sync failure is a warning (left for 'applyonce recover'), never a
    failure of the call. ``record``: see :func:`sync_many`."""
    try:
        return sync_many(ctx, [receipt], held=held, record=record)
    except (ApplyOnceError, OSError) as exc:
        reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
        return [SyncReport(None, (), (), failed=reason)]


# Said of a command that brings a checkout in line: it never discards the user's changes.
_KEEPS = "the command that follows keeps them, a conflict marked in the file and kept in the stash"


def behind_of(ctx: Context, ref: str, reports: Sequence[SyncReport]) -> list[CheckoutBehind]:
    """The checkouts of ``ref`` that do not show its tip after a sync (``reports``), each with
    why and the command that brings it in line."""
    branch = ref.removeprefix("refs/heads/")
    behind: list[CheckoutBehind] = []
    for report in reports:
        if report.failed:
            behind.append(
                CheckoutBehind(
                    report.worktree,
                    branch,
                    (),
                    f"it was not updated: {report.failed}",
                    "applyonce recover",
                )
            )
        if report.behind:
            behind.append(
                CheckoutBehind(
                    report.worktree,
                    branch,
                    report.behind,
                    "your uncommitted changes there were made on an older version, and are left"
                    f" as they are; {_KEEPS}",
                    keep_edits_command(branch, report.since)
                    if report.since is not None
                    else "git status",
                )
            )
        if report.unfollowed:
            remote = ctx.remote or "the remote"
            if report.diverged:
                why = f"it holds commits of yours that {remote}'s has not; merge them"
                command = f"git pull --no-rebase --autostash {remote} {branch}"
            else:
                why = f"the checkout holds changes of yours on files {remote}'s changed; {_KEEPS}"
                command = pull_command(remote, branch)
            behind.append(
                CheckoutBehind(
                    report.worktree,
                    branch,
                    (),
                    f"{branch} here has not followed {remote}'s: {why}",
                    command,
                )
            )
    return behind


def catch_up(ctx: Context, ref: str, to: str | None) -> list[SyncReport]:
    """Before a call staged on ``to``: bring the checkouts of ``ref`` up to the branch's tip
    (:func:`bring_up`), and, with a remote as the commit point, move a checked-out local ``ref``
    that lags the remote's (its tip is an ancestor of ``to``, the remote tip) up to ``to`` and
    sync what the commits in between change, as ``git pull --ff-only`` would. The branch is not
    moved when it has commits of the user's own, when no work tree has it checked out (the
    publisher's ``follow`` moves such a branch), or when a checkout holds the user's edits on a
    path those commits change (the call then finds them). A sync that cannot run (the user's
    git holds ``index.lock``) is reported, never an error: the call judges the checkout by what
    it shows.

    The move is journaled first, so a crash before the files are synced is finished by
    ``recover`` (:func:`resume_catch_up`).

    Raises:
        UnshownBranchError: a checkout of ``ref`` shows no commit of it while ``to`` exists.
    """
    ensure_dir(ctx.state_dir)
    with file_lock(ctx.state_dir / SYNC_LOCK):
        clear_dead_syncs(ctx)
        with contextlib.suppress(ApplyOnceError, OSError):
            resume_catch_up(ctx, locked=True)
        checkouts = ctx.checkouts.checkouts_of(ref)
        if not checkouts:
            return []
        local = ctx.store.tip(ref)
        _refuse_unshown(ctx, ref, local, to, checkouts)
        try:
            return _catch_up(ctx, ref, local, to)
        except (ApplyOnceError, OSError) as exc:
            reason = exc.one_line() if isinstance(exc, ApplyOnceError) else str(exc)
            return [SyncReport(None, failed=reason)]


def _catch_up(ctx: Context, ref: str, local: str | None, to: str | None) -> list[SyncReport]:
    """:func:`catch_up`, with the sync lock held and the branch's checkouts showing a commit."""
    reports = bring_up(ctx, ref)
    if reports and all(r.shows_tip for r in reports):
        _record_caught_up(ctx, ref, local)
    return [*reports, *_follow_remote(ctx, ref, local, to, reports)]


def _follow_remote(
    ctx: Context, ref: str, local: str | None, to: str | None, reports: Sequence[SyncReport]
) -> list[SyncReport]:
    """With a remote as the commit point: move the checked-out ``ref`` from ``local`` up to
    ``to`` (the remote's tip) and sync what the commits in between change, as ``git pull
    --ff-only`` would; only where it lags (``local`` is an ancestor of ``to``), its checkouts
    show ``local`` (``reports``: their sync up to it) and hold no edit of the user's on a path
    those commits change. Journaled first (:func:`resume_catch_up`). Called with the sync lock
    held. Returns the reports of the sync (none: it did not move)."""
    if ctx.remote is None or to is None or local is None or local == to:
        return []
    if not ctx.store.has_object(to) or not ctx.store.is_ancestor(local, to):
        return []  # the user's own commits are on it: theirs to merge
    if not all(r.shows_tip for r in reports):
        return []  # their edits: theirs to merge
    paths = sorted(ctx.store.paths_changed(local, to))
    if ctx.checkouts.dirty_paths(ref, ctx.store.tree_at(local), paths):
        return []
    journal = ctx.state_dir / CATCH_UP_FILE
    atomic_write(journal, orjson.dumps({"ref": ref, "from": local, "to": to}))
    assert ctx.index is not None  # open_context makes one
    with holding_checkouts(ctx, ref, paths, locked=True) as held:
        LocalRefPublisher(ctx.store, ctx.index, lock_journal(ctx)).publish(
            ref, local, to, reason=f"applyonce: follow {ctx.remote}"
        )
        fault("during-catch-up")
        moved = bring_up(ctx, ref, extra=[local], held=held)
    if not any(r.failed for r in moved):
        remove_file(journal, durable=True)
    if all(r.shows_tip for r in moved):
        _record_caught_up(ctx, ref, to)
    return moved


def _record_caught_up(ctx: Context, ref: str, tip: str | None) -> None:
    """The calls left unsynced whose commits the checkouts show now that they were brought to
    ``tip``: synced. Only in the repository's own ledger: a fleet's holds other clones' calls,
    whose checkouts are theirs."""
    if tip is None or ctx.ledger_url is not None or not (ctx.state_dir / LEDGER_FILE).exists():
        return
    shown = [
        row
        for row in ctx.ledger.unsynced(ref)
        if row.commit_id is not None
        and ctx.store.has_object(row.commit_id)
        and ctx.store.is_ancestor(row.commit_id, tip)
    ]
    if shown:
        ctx.ledger.record(
            *(
                Event(
                    row.call_id,
                    row.execution_id,
                    EventKind.SYNCED,
                    RowChange(synced=True),
                    {"caught_up": tip},
                )
                for row in shown
            )
        )


def _refuse_unshown(
    ctx: Context, ref: str, local: str | None, to: str | None, checkouts: Sequence[Any]
) -> None:
    """Refuse a call on ``ref`` (staged on ``to``) whose checkout shows no commit of it: its
    sync would write the call's files alone there, and leave every other file of the branch a
    staged deletion (the user's next 'git commit' would delete them)."""
    branch = ref.removeprefix("refs/heads/")
    if local is None and to is not None:
        first = str(Path(checkouts[0].workdir))
        raise UnshownBranchError(
            f"the checkout at {first} has no commit of {branch} yet, but {ctx.remote}'s"
            f" {branch} has: the call's files alone would be written there",
            hint=f"check {branch} out first ('git pull {ctx.remote} {branch}' there), then"
            " repeat the call",
            worktree=first,
        )
    if local is None:
        return
    empty: list[str] = []
    # An index that cannot be read is the dirty check's to report, in its words.
    with contextlib.suppress(ApplyOnceError, OSError):
        empty = ctx.checkouts.empty_checkouts(checkouts, ctx.store.tree_at(local))
    for worktree in empty:
        raise UnshownBranchError(
            f"the checkout at {worktree} shows none of {branch}'s files (its index is empty:"
            f" {branch} got its commits while it had none), so git sees each of them as deleted",
            hint="check them out first ('git read-tree -um HEAD' there: it stops before"
            " overwriting a file of yours), then repeat the call",
            worktree=worktree,
        )


def catch_up_checkouts(ctx: Context) -> dict[str, list[SyncReport]]:
    """Bring every checkout of this repository up to its branch as :func:`catch_up` does before
    a call, whatever the ledger records: a ``synced`` event in a ledger that clones share may
    be another clone's, and this clone's checkouts are judged by what they show. With a remote
    as the commit point, a branch here that lags the remote's by calls of the ledger only (one
    whose publish was finished elsewhere, say) follows it as well, or is said not to; other
    commits there are the user's to pull (a new call catches up with them). A checkout that
    shows none of its branch's commits is left for the next call, which refuses it.

    Returns:
        The reports of each branch's sync (none where nothing lagged).

    Raises:
        ApplyOnceError: the remote cannot be asked.
    """
    reports: dict[str, list[SyncReport]] = {}
    for ref in ctx.checkouts.checked_out():
        local = ctx.store.tip(ref)
        to = ctx.publisher.tip(ref) if ctx.remote is not None else None
        if to is not None and not _calls_only(ctx, local, to):
            to = None
        with contextlib.suppress(UnshownBranchError):
            found = catch_up(ctx, ref, to)
            unshown = not all(r.shows_tip for r in found)
            if to is not None and to != ctx.store.tip(ref) and not unshown:
                found.append(_unfollowed(ctx, ref))
            reports[ref] = found
    return reports


CALLS_ONLY_DEPTH = 1000  # commits read at most to tell a branch lags by calls only


def _calls_only(ctx: Context, local: str | None, to: str) -> bool:
    """Whether every commit from ``local`` to ``to`` is the commit of a committed call of the
    ledger (at most :data:`CALLS_ONLY_DEPTH` of them)."""
    if local is None or local == to or not ctx.store.is_ancestor(local, to):
        return False
    for depth, (commit, trailers) in enumerate(
        ctx.store.walk_trailers(to, hide=local, key="Call-Id")
    ):
        rows = [ctx.ledger.get(call) for call in trailers.all("Call-Id")]
        ours = [r for r in rows if r is not None and r.state == "committed"]
        if depth >= CALLS_ONLY_DEPTH or not any(r.commit_id == commit for r in ours):
            return False
    return True


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
