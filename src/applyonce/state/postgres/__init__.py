"""The PostgreSQL backend of :mod:`applyonce.state`: a ledger that many hosts share.

The only package that imports ``psycopg``; it is imported only when a ``postgresql://`` ledger
is used (:mod:`applyonce.flow.context` imports this package by name then), so a command on the
local SQLite ledger never loads the driver.
"""

from applyonce.state.postgres.ledger import PostgresLedger

__all__ = ["PostgresLedger"]
