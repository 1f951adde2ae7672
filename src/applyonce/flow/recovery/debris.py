"""What killed writers leave behind, found by ``applyonce recover``: temp files of receipts, Git
lock files, temp files in the work tree, scratch checkouts that no longer open, and the ``.keep``
files of killed calls' packs.

In the user's repository only what applyonce can prove its own is removed: the lock files its
journal records (:mod:`applyonce.state.lockjournal`: the ``index.lock`` of a call or sync killed
between the branch's move and the checkout's sync, the branch's ref lock libgit2 took for a killed
publish) and the temp files of its killed syncs. Any other lock
file nobody holds open (the user's ``git commit`` waiting for its editor, a killed git's ref lock)
is reported with what to do, never removed. A pack's ``.keep`` is removed only if the journal
names it, its holder is dead and it holds the holder's marker (a ``git index-pack --keep``'s, or
the user's, stays), and only once the calls are settled (:func:`remove_dead_keeps_of`): until a
killed call's commit is published or given up, its pack must stay safe from ``git repack``.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from applyonce.flow.checkouts.sync import SYNC_LOCK, lock_journal
from applyonce.flow.context import Context, scratch_dir
from applyonce.git.scratch import is_repository
from applyonce.state.files import stale_temp_files
from applyonce.state.lockjournal import journaled_locks, remove_dead_keeps, remove_own_locks
from applyonce.state.locks import foreign_lock_notes, lock_is_held, stale_locks, try_file_lock

GIT_LOCK_PATTERNS = ("*.lock", "refs/**/*.lock", "worktrees/*/*.lock", "logs/**/*.lock")


def remove_debris(ctx: Context) -> tuple[list[str], list[str]]:
    """Remove the debris of dead writers; returns the paths removed and notes for the user."""
    removed: list[str] = []
    notes: list[str] = []
    # Receipts' temp files, and packs' (applyonce.git.packs names them so, not git's tmp_*).
    for tmp in [
        *stale_temp_files(ctx.receipts.dir),
        *stale_temp_files(ctx.store.objects_dir / "pack"),
    ]:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(str(tmp))
    journal = lock_journal(ctx)
    if journal.is_dir():
        # No sync, nor a publish with checkouts, can run while we hold the sync lock, so every
        # journaled index.lock holder is dead; a ref lock's entry says itself whether its
        # holder lives.
        with try_file_lock(ctx.state_dir / SYNC_LOCK) as free:
            removed.extend(remove_own_locks(journal, holders_dead=free, ref_at=ctx.store.tip))
    # A running sync's own lock is not the user's business.
    notes.extend(foreign_lock_notes(_git_locks(ctx) - journaled_locks(journal)))
    removed.extend(_remove_stale_scratch_locks(ctx))
    scratch = scratch_dir(ctx)
    if scratch.is_dir():
        for slot in scratch.iterdir():
            if not slot.is_dir() or is_repository(slot):
                continue
            if not lock_is_held(scratch / f"{slot.name}.lock"):
                shutil.rmtree(slot, ignore_errors=True)
                removed.append(str(slot))
    return removed, notes


def remove_dead_keeps_of(ctx: Context) -> list[str]:
    """Remove the ``.keep`` files killed calls left beside their packs (once those calls are
    settled: the branch reaches the objects of those that landed); returns the paths removed."""
    return remove_dead_keeps(lock_journal(ctx))


def _git_locks(ctx: Context) -> set[Path]:
    common = ctx.store.common_dir
    candidates: set[Path] = set()
    for pattern in GIT_LOCK_PATTERNS:
        candidates.update(p for p in common.glob(pattern) if p.is_file())
    return candidates


def _remove_stale_scratch_locks(ctx: Context) -> list[str]:
    """Scratch checkouts are applyonce's own: a lock in one that nobody holds is debris."""
    scratch = scratch_dir(ctx)
    if not scratch.is_dir():
        return []
    candidates = {p for p in scratch.glob("*/.git/**/*.lock") if p.is_file()}
    removed = []
    for lock in stale_locks(candidates):
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
            removed.append(str(lock))
    return removed
