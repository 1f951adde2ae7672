"""The PostgreSQL backend of :mod:`applyonce.state`: a ledger that many hosts share.

The only package that imports ``psycopg``, and only when a ``postgresql://`` ledger is used:
importing :mod:`applyonce.state.postgres.ledger` loads the driver, this package does not.
"""
