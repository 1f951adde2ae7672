"""applyonce's own durable state, and every file write and lock.

``ledger`` (the :class:`~applyonce.state.ledger.Ledger` seam and its typed events), ``lease`` (when
a claim holds: its owner, its lease, the heartbeat that renews it), ``sqlite`` (the
SQLite ledger and history cache: the only package that imports sqlite3), ``receipts`` (the
receipts directory), ``files`` (the one atomic, fsynced file write) and ``locks``.

May import :mod:`applyonce.core` and :mod:`applyonce.patch`; never Git.
"""
