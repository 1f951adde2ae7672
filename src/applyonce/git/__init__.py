"""The Git edge, and the only package that imports pygit2.

``store`` (objects, trees, commits, history), ``publisher`` (the commit point: a compare-and-swap
of the branch ref, and "which commits carrying Call-Id X are on the branch"; ``remote``: the same
on a shared remote's branch, by git fetch and push), ``history`` (the
Call-Id history index, a cache of Git), ``checkouts`` (the user's work trees: dirty paths refused,
synced after a call) and ``scratch`` (the checkout ``--check`` commands run in).

May import :mod:`applyonce.state` (file writes), :mod:`applyonce.core`, :mod:`applyonce.patch`.
"""
