"""Which commits the user's checkouts of a branch may still show: the branch's tip, or one it had
before.

A checkout shows what its index records, and a branch moves without its checkout in many ways:
a sync applyonce left for later (the user's git held ``index.lock``, a path held the user's
edits), ``git update-ref``, a fetch into the branch, another tool, a remote's branch that other
clones moved. A file that still holds the version the checkout was brought to last is not the
user's edit however far the branch has moved since; committing it as one would undo every commit
in between, and syncing only the paths of the next call would leave the rest behind.

:func:`shown_by_checkouts` gathers those commits from three records:

* the branch's reflog, read from its newest entry back to the last one that moved the checkout
  with the branch (git's own commit, merge, pull, reset, rebase…: they write the index as they
  move the branch) or to the entry applyonce noted when it last saw every checkout show the tip
  (:func:`note_followed`, ``<state>/followed.json``): each entry in between moved the branch
  alone, and the checkout may still show where it was before. With the branch checked out in
  several work trees (``git worktree add -f``), git's own move brought along only the work
  tree whose command made it (git writes the entry to that work tree's ``HEAD`` log too, and
  to no other's): each work tree is read back to its own move, and judged by what it may show
  (:attr:`Shown.each <applyonce.git.checkouts.Shown>`);
* the bases of the calls whose sync is still to be done (the ledger): what the reflog cannot
  tell where there is none (``core.logAllRefUpdates=false``);
* what the caller knows (the local branch a remote's call is staged past).

Every entry read is one the checkout could show: taking one too many costs a sync that finds
the files as the tip has them; missing one would take the branch's own version for the user's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

import orjson

from applyonce.flow.checkouts.dirty import is_snapshot_of
from applyonce.flow.context import LEDGER_FILE, Context
from applyonce.git.checkouts import CheckoutLog, Shown
from applyonce.git.store import RefMove
from applyonce.state.files import atomic_write

FOLLOWED_FILE = "followed.json"  # per branch: the tip its checkouts were last seen to show
REFLOG_DEPTH = 200  # reflog entries read at most: the moves since the checkout was last followed
HEAD_LOG_DEPTH = 1000  # of a work tree's HEAD log (its moves to other branches too)
# The commands that write the checkout's index as they move its branch (the first word of the
# reflog messages git writes: "commit (amend): …", "merge origin/main: Fast-forward", "pull: …",
# "reset: moving to …", "rebase (finish): …", "branch: Created from …", "clone: from …").
_MOVES_THE_CHECKOUT = frozenset(
    {
        "am",
        "branch",
        "Branch",
        "checkout",
        "cherry-pick",
        "clone",
        "commit",
        "initial",
        "merge",
        "pull",
        "rebase",
        "reset",
        "revert",
        "switch",
    }
)


def _moved_the_checkout(move: RefMove) -> bool:
    """Whether the reflog entry ``move`` was written by a git command that brings the checkout
    along with the branch."""
    head = move.message.split(":", 1)[0].strip()
    return head.split(" ", 1)[0] in _MOVES_THE_CHECKOUT if head else False


def shown_by_checkouts(
    ctx: Context,
    ref: str,
    tip: str | None,
    *,
    extra: Iterable[str | None] = (),
    ask_ledger: bool = True,
    checkouts: Sequence[Any] | None = None,
) -> Shown:
    """The commits the checkouts of ``ref`` (``checkouts``, if the caller has them) may show
    besides ``tip`` (the tip a call is staged on or a sync brings them to): see the module's
    docstring; with the branch checked out in several work trees, also what each of them may
    show (:attr:`Shown.each`). ``extra``: commits the caller knows they may show. Asks the
    ledger (``ask_ledger``: False for a dry run, which opens none): call it only where ``ref``
    has a checkout."""
    if checkouts is None:
        checkouts = ctx.checkouts.checkouts_of(ref)
    # None among them: a call made while the branch was unborn (its checkout showed nothing).
    common: list[str | None] = [*extra]
    # No ledger yet: no call to sync.
    has_ledger = ctx.ledger_url is not None or (ctx.state_dir / LEDGER_FILE).exists()
    for row in ctx.ledger.unsynced(ref) if ask_ledger and has_ledger else ():
        base = row.base_commit
        if base is not None and is_snapshot_of(ctx, base, row.call_id):
            base = ctx.store.parent_of(base)  # the checkout held the snapshot's parent
        common.append(base)
    walks = _since_followed(ctx, ref, checkouts)
    every = [c for walk in walks.values() for c in walk]
    shown = _shown(ctx, tip, [*every, *common])
    if len(walks) < 2:
        return shown
    each = {
        worktree: _shown(ctx, tip, [*walk, *common])
        for worktree, walk in walks.items()
        if worktree is not None
    }
    return replace(shown, each=tuple(sorted(each.items())))


def _shown(ctx: Context, tip: str | None, candidates: list[str | None]) -> Shown:
    """What a checkout may show besides ``tip``, of the commits ``candidates``."""
    # Read back from the state directory and the ledger: only commits of this repository count.
    found = [
        c for c in dict.fromkeys(candidates) if c != tip and (c is None or ctx.store.is_commit(c))
    ]
    if tip is None or not found:
        return Shown(tip)
    # Those on the way to the tip count from the oldest of them; the others (the branch moved
    # back, or to another line) each by itself, never by the history below them.
    oldest, apart = ctx.store.oldest_on(tip, [c for c in found if c is not None])
    if None in found:
        return Shown(None, tuple(apart))
    return Shown(oldest or tip, tuple(apart))


def shown_for_call(
    ctx: Context, ref: str, base: str | None, *, ask_ledger: bool = True
) -> Shown | None:
    """What the checkouts of ``ref`` may show besides ``base``, the commit a call is staged on
    (with a remote: past the local branch, which they show at most). None: no checkout."""
    checkouts = ctx.checkouts.checkouts_of(ref)
    if not checkouts:
        return None
    local = ctx.store.tip(ref)
    extra = [local] if local != base else []
    return shown_by_checkouts(
        ctx, ref, base, extra=extra, ask_ledger=ask_ledger, checkouts=checkouts
    )


def paths_to_bring(ctx: Context, shown: Shown, tip: str) -> list[str]:
    """The paths that may differ between what the checkouts show and ``tip``."""
    paths = ctx.store.paths_changed(shown.since, tip)
    for commit in shown.tips:
        paths |= ctx.store.paths_changed(commit, tip)
    return sorted(paths)


def note_followed(ctx: Context, ref: str, tip: str) -> None:
    """Note that every checkout of ``ref`` shows ``tip`` (after a sync that brought them all
    there), with the reflog entry that moved the branch to it: the reflog is read back to that
    entry, no further, until the branch moves without them again. Called with the sync lock
    held."""
    newest = ctx.store.ref_moves(ref, 1)
    entry = _entry(newest[0]) if newest and newest[0].new == tip else None
    followed = _read_followed(ctx)
    value = {"commit": tip, "entry": entry}
    if followed.get(ref) == value:
        return
    followed[ref] = value
    # Not durable: a lost note only makes the next call read further back.
    atomic_write(
        ctx.state_dir / FOLLOWED_FILE, orjson.dumps(followed), durable=False, sync_dir=False
    )


def _since_followed(
    ctx: Context, ref: str, checkouts: Sequence[Any]
) -> dict[str | None, list[str]]:
    """Where the branch was at each move its reflog records since the checkouts last followed
    it, and where they followed it (the last noted tip, where the reflog says nothing). With
    the branch checked out in several work trees, a move of git's own brought along only the
    checkout whose command made it (its ``HEAD`` log has the entry too): each is read back to
    its own, by work tree; else the one list is keyed by None."""
    noted = _read_followed(ctx).get(ref)
    noted_commit = noted.get("commit") if isinstance(noted, dict) else None
    noted_entry = noted.get("entry") if isinstance(noted, dict) else None
    logs: dict[str | None, CheckoutLog | None] = {None: None}
    if len(checkouts) > 1:
        logs = {log.worktree: log for log in ctx.checkouts.head_logs(checkouts, HEAD_LOG_DEPTH)}
    walks: dict[str | None, list[str]] = {}
    found: list[str] = []
    for move in ctx.store.ref_moves(ref, REFLOG_DEPTH):
        # The branch's creation counts as followed: a checkout of it shows it from then on (one
        # that showed nothing is told by its empty index).
        if move.old is None or (noted_entry is not None and _entry(move) == noted_entry):
            return walks | {worktree: [*found, move.new] for worktree in logs}
        moved = _moved_the_checkout(move)
        for worktree, log in list(logs.items()):
            # A work tree made after this move showed the branch as it left it.
            made_later = log is not None and log.started is not None and move.time < log.started
            if made_later or (moved and (log is None or log.moved(move))):
                walks[worktree] = [*found, move.new]
                del logs[worktree]
        if not logs:
            return walks
        found.append(move.old)  # this move left the checkout where the branch was before it
    rest = [*found, noted_commit] if isinstance(noted_commit, str) else found
    return walks | {worktree: rest for worktree in logs}


def _entry(move: RefMove) -> list[object]:
    return [move.old, move.new, move.time, move.message]


def _read_followed(ctx: Context) -> dict[str, object]:
    with contextlib.suppress(OSError, orjson.JSONDecodeError):
        data = orjson.loads((ctx.state_dir / FOLLOWED_FILE).read_bytes())
        if isinstance(data, dict):
            return data
    return {}
