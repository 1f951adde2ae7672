"""applyonce's own state is out of a patch's reach.

The receipts and the ledger are the record of why; a patch that could write them could forge a
call's outcome. So:

* the state directory may not be inside a work tree of the repository (outside its ``.git``),
  nor hold one — compared as spelled and as resolved, so a symlink on either side changes
  nothing (:func:`check_state_location`);
* a patch path that resolves, in any work tree, into the state directory is refused
  (:func:`refuse_state_paths`) — a symlink in the work tree that points into ``.git/applyonce``
  cannot carry a write there.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from applyonce.core.paths import UnsafePathError, is_git_dir_name, is_within
from applyonce.errors import UsageError
from applyonce.git.store import GitStore


class StateLocationError(UsageError):
    """The state directory is where a patch could write it."""

    kind = "state-dir"
    default_hint = "pass a --state-dir outside the work tree (or leave the default, inside .git)"


def _spellings(path: Path) -> set[str]:
    """``path`` absolute as given, and with every symlink resolved."""
    return {os.path.abspath(path), os.path.realpath(path)}


def check_state_location(store: GitStore, state: Path) -> None:
    """Refuse a state directory a patch could reach through a work tree.

    Raises:
        StateLocationError: ``state`` is inside a work tree (and not inside its ``.git``) or
            contains one.
    """
    states = _spellings(state)
    for root in store.worktree_roots():
        for tree in _spellings(root):
            for where in states:
                if is_within(tree, where):
                    raise StateLocationError(
                        f"the state directory {state} contains the work tree {root}",
                        path=str(state),
                    )
                if is_within(where, tree):
                    first = os.path.relpath(where, tree).split(os.sep)[0]
                    if not is_git_dir_name(first):
                        raise StateLocationError(
                            f"the state directory {state} is inside the work tree {root},"
                            " where a patch could write it",
                            path=str(state),
                        )


def refuse_state_paths(store: GitStore, state: Path, paths: Iterable[str]) -> None:
    """Refuse patch paths that lead, in some work tree, into the state directory.

    Raises:
        UnsafePathError: a path resolves into ``state`` (through a symlink in the work tree).
    """
    states = _spellings(state)
    roots = store.worktree_roots()
    for path in paths:
        for root in roots:
            target = os.path.realpath(root / path)
            if any(is_within(target, where) for where in states):
                raise UnsafePathError(
                    f"path {path!r} leads into applyonce's state directory", path=path
                )
