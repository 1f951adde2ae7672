"""The use cases: what applyonce does, each in its own module, over the seams below it.

``apply`` (the corridor of one call), ``settle`` (a call's receipt and ledger row, written
together), ``adopt`` (the record of a call found in Git), ``checks``, ``approval``, ``sync`` (the
user's checkouts after a call), ``recovery`` / ``repair`` / ``debris`` (after a crash), ``audit``,
``replay``, ``resolve`` and ``calls`` (inspection). Each takes a
:class:`~applyonce.flow.context.Context`.

May import :mod:`applyonce.git`, :mod:`applyonce.state`, :mod:`applyonce.core`,
:mod:`applyonce.patch`; never an adapter, never pygit2 or sqlite3.
"""
