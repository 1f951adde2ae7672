"""Opening a SQLite database of applyonce: WAL, a busy timeout, named migrations.

Switching a new database to WAL and migrating it are serialised between processes by a lock file
beside it: two first-time openers would otherwise get ``SQLITE_BUSY`` without waiting. Both waits
are bounded (:data:`BUSY_TIMEOUT_S`, :data:`applyonce.state.locks.LOCK_WAIT_S`): a writer that
hangs makes the others fail with "busy" (exit 4), never hang with it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from applyonce.core.receipt import now
from applyonce.errors import ApplyOnceError
from applyonce.state.files import PRIVATE_FILE, ensure_dir
from applyonce.state.ledger import LedgerBusyError, LedgerError, pending_migrations
from applyonce.state.locks import LockBusyError, file_lock
from applyonce.state.storage import storage_cause, storage_error

Migrations = Sequence[tuple[str, str]]
# How long a statement waits for another connection's write transaction (they last milliseconds).
BUSY_TIMEOUT_S = 5.0


def database_error(path: Path, exc: sqlite3.Error) -> ApplyOnceError:
    """The applyonce error for a SQLite failure: busy (retry), the storage (a full disk, a
    read-only file system: said so, the ledger is fine), or a damaged file (move it aside)."""
    text = str(exc)
    name = getattr(exc, "sqlite_errorname", "")
    if "locked" in text or "busy" in text:
        return LedgerBusyError(
            f"the ledger {path} is busy ({exc}; waited {BUSY_TIMEOUT_S:g} s)",
            hint="another applyonce process holds the ledger; retry in a moment, or stop that "
            "process if it is stuck",
        )
    if name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB" or "malformed" in text:
        return LedgerError(f"the ledger {path} is unreadable ({exc})")
    cause = storage_cause(path.parent)
    if cause is None and name == "SQLITE_FULL":
        cause = "the disk is full"
    if cause is not None:
        return storage_error(path.parent, cause, f"SQLite: {exc}")
    return LedgerError(
        f"the ledger {path} could not be read or written ({exc})",
        hint="check the disk that holds it, then repeat the call (this error does not mean the"
        " ledger is damaged: keep it)",
    )


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
        self._synchronous = synchronous
        try:
            self._open(migrations)
        except OSError as exc:
            cause = storage_cause(path.parent, exc)
            if cause is None:
                raise
            raise storage_error(path.parent, cause, exc.strerror or "") from None

    def _open(self, migrations: Migrations) -> None:
        path, error = self.path, self._error
        ensure_dir(path.parent)
        try:
            with file_lock(path.parent / f"{path.stem.split('.')[0]}.lock"):
                # SQLite would create the file 0644; made first, 0600, it also sets the mode of
                # the -wal and -shm files, which SQLite copies from the database file.
                os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE))
                try:
                    self.db = self._connect()
                    mode = self.db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                    if mode != "wal":
                        raise sqlite3.DatabaseError(f"journal mode is {mode}, not wal")
                    self._migrate(migrations)
                except sqlite3.Error as exc:
                    raise error(path, exc) from None
        except LockBusyError as exc:
            raise LedgerBusyError(exc.message, hint=exc.hint, path=str(path)) from None

    def _connect(self) -> sqlite3.Connection:
        # Not tied to the opening thread: a long-lived process (the MCP server, an agent
        # adapter) keeps one connection and uses it from whichever worker thread runs its
        # current call, one call at a time (applyonce.adapters.agents).
        db = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        db.execute(f"PRAGMA synchronous = {self._synchronous}")
        return db

    @classmethod
    def in_memory(cls, path: Path, migrations: Migrations) -> Database:
        """A database in memory that reports itself as ``path`` (reading a repository that has no
        state yet, without creating any)."""
        database = cls.__new__(cls)
        database.path = path
        database._error = database_error
        database._synchronous = ""  # no file: side_transaction() has nothing to open
        database.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        database._migrate(migrations)
        return database

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def side_transaction(self) -> Iterator[sqlite3.Connection]:
        """A transaction on a connection of its own, opened and closed here: usable from a thread
        other than the one that opened this database (a lease's heartbeat), while that one works.
        """
        if not self._synchronous:
            raise LedgerError(f"the ledger {self.path} is only in memory here")
        try:
            db = self._connect()
        except sqlite3.Error as exc:
            raise self._error(self.path, exc) from None
        try:
            with _transaction(db, self.path, self._error) as inside:
                yield inside
        finally:
            db.close()

    def transaction(
        self, *, durable: bool = True
    ) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``: one writer at a time, all or nothing.

        ``durable=False``: the commit is atomic and visible at once, but not fsynced (WAL,
        ``synchronous=NORMAL`` for this one commit): it reaches the disk with the next durable
        commit, whose fsync of the WAL covers every frame before it. For records whose loss in a
        power cut costs nothing (see :data:`applyonce.state.ledger.DEFERRED_KINDS`)."""
        if durable or self._synchronous != "FULL":
            return _transaction(self.db, self.path, self._error)
        return self._deferred()

    @contextlib.contextmanager
    def _deferred(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("PRAGMA synchronous = NORMAL")
        try:
            with _transaction(self.db, self.path, self._error) as db:
                yield db
        finally:
            self.db.execute("PRAGMA synchronous = FULL")

    def _migrate(self, migrations: Migrations) -> None:
        if self._migrated(migrations):
            return  # the usual case, read without a write transaction (nor its fsync)
        with self.transaction() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS migrations"
                " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in db.execute("SELECT name FROM migrations")}
            for name, statements in pending_migrations(migrations, done):
                for statement in statements:
                    db.execute(statement)
                db.execute("INSERT INTO migrations VALUES (?, ?)", (name, now()))

    def _migrated(self, migrations: Migrations) -> bool:
        try:
            rows = self.db.execute("SELECT name FROM migrations").fetchall()
        except sqlite3.OperationalError:  # no such table: a new database
            return False
        return {name for name, _ in migrations} <= {row[0] for row in rows}


@contextlib.contextmanager
def _transaction(
    db: sqlite3.Connection, path: Path, error: Callable[[Path, sqlite3.Error], ApplyOnceError]
) -> Iterator[sqlite3.Connection]:
    try:
        db.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        raise error(path, exc) from None
    try:
        yield db
        db.execute("COMMIT")
    except BaseException as exc:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        # An operational error is the database's or its storage's (locked, disk full,
        # read-only, I/O): said for what it is, never a traceback.
        if isinstance(exc, sqlite3.OperationalError):
            raise error(path, exc) from None
        raise
