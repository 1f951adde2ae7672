"""The SQLite backend of :mod:`applyonce.state`: the local ledger and the history cache.

The only package that imports ``sqlite3``. Each database is its own file under the state
directory, opened through :func:`applyonce.state.sqlite.connection.connect` (WAL, named
migrations, opening serialised between processes).
"""
