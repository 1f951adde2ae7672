"""Opening a SQLite database of applyonce: WAL, a busy timeout, named migrations.

Switching a new database to WAL and migrating it are serialised between processes by a lock file
beside it: two first-time openers would otherwise get ``SQLITE_BUSY`` without waiting.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from applyonce.core.receipt import now
from applyonce.errors import ApplyOnceError
from applyonce.state.files import ensure_dir
from applyonce.state.ledger import LedgerBusyError, LedgerError
from applyonce.state.locks import file_lock

Migrations = Sequence[tuple[str, str]]


def database_error(path: Path, exc: sqlite3.Error) -> ApplyOnceError:
    """The applyonce error for a SQLite failure: busy (retry) or unreadable (move it aside)."""
    if "locked" in str(exc) or "busy" in str(exc):
        return LedgerBusyError(f"the ledger {path} is busy ({exc})")
    return LedgerError(f"the ledger {path} is unreadable ({exc})")


class Database:
    """One connection, with ``transaction()`` and the migrations applied."""

    def __init__(
        self,
        path: Path,
        migrations: Migrations,
        *,
        synchronous: str = "FULL",
        error: Callable[[Path, sqlite3.Error], ApplyOnceError] = database_error,
    ) -> None:
        self.path = path
        self._error = error
        ensure_dir(path.parent)
        with file_lock(path.parent / f"{path.stem.split('.')[0]}.lock"):
            try:
                self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
                self.db.execute("PRAGMA busy_timeout = 60000")
                mode = self.db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                self.db.execute(f"PRAGMA synchronous = {synchronous}")
                if mode != "wal":
                    raise sqlite3.DatabaseError(f"journal mode is {mode}, not wal")
                self._migrate(migrations)
            except sqlite3.Error as exc:
                raise error(path, exc) from None

    @classmethod
    def in_memory(cls, path: Path, migrations: Migrations) -> Database:
        """A database in memory that reports itself as ``path`` (reading a repository that has no
        state yet, without creating any)."""
        database = cls.__new__(cls)
        database.path = path
        database._error = database_error
        database.db = sqlite3.connect(":memory:", isolation_level=None)
        database._migrate(migrations)
        return database

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``: one writer at a time, all or nothing."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._error(self.path, exc) from None
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and (
                "locked" in str(exc) or "disk" in str(exc) or "busy" in str(exc)
            ):
                raise self._error(self.path, exc) from None
            raise

    def _migrate(self, migrations: Migrations) -> None:
        with self.transaction() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS migrations"
                " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in db.execute("SELECT name FROM migrations")}
            for name, sql in migrations:
                if name in done:
                    continue
                for statement in filter(str.strip, sql.split(";")):
                    db.execute(statement)
                db.execute("INSERT INTO migrations VALUES (?, ?)", (name, now()))
