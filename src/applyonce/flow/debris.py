"""What killed writers leave behind, found and removed by ``applyonce recover``: temp files of
receipts, Git lock files nobody holds, and scratch checkouts that no longer open."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from applyonce.flow.checks import scratch_dir
from applyonce.flow.context import Context
from applyonce.git.scratch import is_repository
from applyonce.state.files import stale_temp_files
from applyonce.state.locks import lock_is_held, stale_locks

GIT_LOCK_PATTERNS = ("*.lock", "refs/**/*.lock", "worktrees/*/*.lock", "logs/**/*.lock")


def remove_debris(ctx: Context) -> list[str]:
    """Remove the debris of dead writers; returns the paths removed."""
    removed: list[str] = []
    for tmp in stale_temp_files(ctx.receipts.dir):
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
            removed.append(str(tmp))
    removed.extend(_remove_stale_locks(ctx))
    scratch = scratch_dir(ctx)
    if scratch.is_dir():
        for slot in scratch.iterdir():
            if not slot.is_dir() or is_repository(slot):
                continue
            if not lock_is_held(scratch / f"{slot.name}.lock"):
                shutil.rmtree(slot, ignore_errors=True)
                removed.append(str(slot))
    return removed


def _remove_stale_locks(ctx: Context) -> list[str]:
    common = ctx.store.common_dir
    candidates: set[Path] = set()
    for pattern in GIT_LOCK_PATTERNS:
        candidates.update(p for p in common.glob(pattern) if p.is_file())
    scratch = scratch_dir(ctx)
    if scratch.is_dir():
        candidates.update(p for p in scratch.glob("*/.git/**/*.lock") if p.is_file())
    removed = []
    for lock in stale_locks(candidates):
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
            removed.append(str(lock))
    return removed
