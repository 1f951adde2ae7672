"""The SQLite ledger: a :class:`applyonce.state.ledger.Ledger` in ``<state>/ledger.sqlite3``.

WAL and ``synchronous=FULL``: a transaction that returned is on disk. ``events`` is append-only;
``calls`` is the current state of each call; every event and the row change it carries are written
in one transaction. Claiming is one ``BEGIN IMMEDIATE`` transaction on ``calls``. A claim's lease
(``lease_expires_at``, ``lease_seconds``) is renewed on a connection of its own, so the heartbeat's
thread can renew while the call's thread works.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import now
from applyonce.state.lease import DEFAULT_LEASE_S, Lease
from applyonce.state.ledger import (
    DEFERRED_KINDS,
    NO_CHANGE,
    REPOSITORY_MIGRATION,
    UNSET,
    CallRow,
    Claim,
    Event,
    EventKind,
    LoggedEvent,
    Owner,
    RowChange,
    check_repository,
    first_claim,
    identity_data,
    judge_claim,
    judge_release,
    judge_renew,
    judge_reopen,
    judge_take_over,
)
from applyonce.state.rows import call_row, logged_event
from applyonce.state.sqlite.connection import Database, database_error

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_events_and_calls",
        """
        CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            call_id TEXT NOT NULL,
            execution_id TEXT,
            kind TEXT NOT NULL,
            at TEXT NOT NULL,
            data TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX events_by_call ON events (call_id, seq);
        CREATE TABLE calls (
            call_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            execution_id TEXT,
            args_sha256 TEXT NOT NULL,
            idempotency_key TEXT,
            ref TEXT NOT NULL,
            base_commit TEXT,
            commit_id TEXT,
            exit_code INTEGER,
            retryable INTEGER NOT NULL DEFAULT 0,
            receipt_sha256 TEXT,
            synced INTEGER NOT NULL DEFAULT 0,
            owner_pid INTEGER,
            owner_host TEXT,
            owner_start TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX calls_by_state ON calls (state);
        """,
    ),
    (
        # No longer written or read (the history index is a cache file of its own now), but kept:
        # a ledger this version opened stays usable by the versions before it.
        "0002_trailer_index",
        """
        CREATE TABLE trailer_index (
            ref TEXT NOT NULL,
            call_id TEXT NOT NULL,
            commit_id TEXT NOT NULL,
            PRIMARY KEY (ref, call_id, commit_id)
        );
        CREATE TABLE scanned (ref TEXT PRIMARY KEY, tip TEXT NOT NULL);
        """,
    ),
    (
        # Columns added at the end, nullable: the versions before this one read rows by column
        # name and insert naming their columns, so they keep working on a migrated ledger (and
        # judge its claims by pid and host, as they always did).
        "0003_claim_leases",
        """
        ALTER TABLE calls ADD COLUMN lease_expires_at TEXT;
        ALTER TABLE calls ADD COLUMN lease_seconds REAL;
        """,
    ),
    (
        # Where the owner's pid means something (its PID namespace and boot): nullable, at the end,
        # for the same reason. A version before this one ignores them and judges by pid and host.
        "0004_owner_namespace",
        """
        ALTER TABLE calls ADD COLUMN owner_pidns TEXT;
        ALTER TABLE calls ADD COLUMN owner_boot TEXT;
        """,
    ),
    (
        # Every sync asks for the unsynced calls of its branch: with this (partial) index that
        # costs those few rows, not one per committed call ever made. A version before this one
        # ignores it.
        "0005_unsynced_calls",
        """
        CREATE INDEX calls_unsynced ON calls (ref, updated_at)
            WHERE state = 'committed' AND synced = 0;
        """,
    ),
    # (0006_receipts is the PostgreSQL ledger's: here the receipts are the files.)
    REPOSITORY_MIGRATION,
]


class SqliteLedger:
    """The local ledger. See :class:`applyonce.state.ledger.Ledger` for the contract.

    ``repository``: the identity of the repository it serves (None: not checked). Recorded the
    first time the ledger is opened for one; another repository's (a state directory two
    repositories were given) is refused.

    Raises (on opening):
        OtherRepositoryError: the ledger serves another repository.
    """

    def __init__(
        self, path: Path, *, in_memory: bool = False, repository: str | None = None
    ) -> None:
        self.path = path
        self.database = (
            Database.in_memory(path, MIGRATIONS) if in_memory else Database(path, MIGRATIONS)
        )
        self.db = self.database.db
        if repository is not None:
            try:
                self._serve(repository)
            except BaseException:
                self.close()
                raise

    def _serve(self, repository: str) -> None:
        """Record ``repository`` as the one this ledger serves, or check it is."""
        row = self.db.execute("SELECT id FROM repository").fetchone()
        if row is None:
            with self.database.transaction() as db:
                db.execute(
                    "INSERT INTO repository (id, recorded_at) SELECT ?, ?"
                    " WHERE NOT EXISTS (SELECT 1 FROM repository)",
                    (repository, now()),
                )
                row = db.execute("SELECT id FROM repository").fetchone()
        check_repository(str(row[0]) if row else None, repository, str(self.path))

    @classmethod
    def empty(cls, path: Path) -> SqliteLedger:
        """An in-memory ledger with no calls, for reading a repository that has no state yet
        without creating any."""
        return cls(path, in_memory=True)

    def close(self) -> None:
        self.database.close()

    # --- reading ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _readable(self) -> Iterator[None]:
        """SQLite's own errors (a dropped table, a damaged file) as the one-line ledger error."""
        try:
            yield
        except sqlite3.Error as exc:
            raise database_error(self.path, exc) from None

    def get(self, call_id: str) -> CallRow | None:
        with self._readable():
            return self._find(self.db, call_id)

    def get_many(self, call_ids: Iterable[str]) -> dict[str, CallRow]:
        with self._readable():
            return self._find_many(self.db, sorted(set(call_ids)))

    def _find(self, db: sqlite3.Connection, call_id: str) -> CallRow | None:
        row = db.execute("SELECT * FROM calls WHERE call_id = ?", (call_id,)).fetchone()
        return None if row is None else self._row(row, db)

    def _find_many(self, db: sqlite3.Connection, call_ids: list[str]) -> dict[str, CallRow]:
        """The rows of ``call_ids`` that exist, one query per 500 (not one per call)."""
        found: dict[str, CallRow] = {}
        for start in range(0, len(call_ids), 500):
            chunk = call_ids[start : start + 500]
            sql = f"SELECT * FROM calls WHERE call_id IN ({','.join('?' * len(chunk))})"
            for r in db.execute(sql, chunk):
                row = self._row(r, db)
                found[row.call_id] = row
        return found

    def calls(self, *, states: tuple[str, ...] | None = None) -> list[CallRow]:
        sql = "SELECT * FROM calls"
        params: tuple[str, ...] = ()
        if states:
            sql += f" WHERE state IN ({','.join('?' * len(states))})"
            params = states
        with self._readable():
            return [
                self._row(r) for r in self.db.execute(sql + " ORDER BY created_at, rowid", params)
            ]

    def unsynced(self, ref: str | None = None) -> list[CallRow]:
        sql = "SELECT * FROM calls WHERE state = 'committed' AND synced = 0"
        params: tuple[str, ...] = ()
        if ref is not None:
            sql += " AND ref = ?"
            params = (ref,)
        with self._readable():
            return [
                self._row(r) for r in self.db.execute(sql + " ORDER BY updated_at, rowid", params)
            ]

    def events(self, call_id: str | None = None) -> list[LoggedEvent]:
        sql = "SELECT seq, call_id, execution_id, kind, at, data FROM events"
        with self._readable():
            rows = (
                self.db.execute(sql + " WHERE call_id = ? ORDER BY seq", (call_id,))
                if call_id
                else self.db.execute(sql + " ORDER BY seq")
            ).fetchall()
        return [self._event(*row) for row in rows]

    def _event(
        self, seq: Any, call_id: Any, execution_id: Any, kind: Any, at: Any, data: Any
    ) -> LoggedEvent:
        """An event read back, refused unless it has the shape :meth:`_append` writes."""
        return logged_event(str(self.path), seq, call_id, execution_id, kind, at, data)

    def _call_columns(self, db: sqlite3.Connection | None = None) -> list[str]:
        """The columns of ``calls`` (asked once per ledger, not once per row)."""
        if not hasattr(self, "_columns"):
            cursor = (db or self.db).execute("SELECT * FROM calls LIMIT 0")
            self._columns = [d[0] for d in cursor.description]
        return self._columns

    def _row(self, row: tuple[Any, ...], db: sqlite3.Connection | None = None) -> CallRow:
        return call_row(dict(zip(self._call_columns(db), row, strict=True)), str(self.path))

    # --- writing ------------------------------------------------------------------------------

    def _append(self, db: sqlite3.Connection, event: Event) -> None:
        at = now()
        changes = event.change.columns()
        data = {"set": changes, **event.data}
        db.execute(
            "INSERT INTO events (call_id, execution_id, kind, at, data) VALUES (?, ?, ?, ?, ?)",
            (event.call_id, event.execution_id, str(event.kind), at, orjson.dumps(data).decode()),
        )
        if changes:
            assignments = ", ".join(f"{col} = ?" for col in changes)
            db.execute(
                f"UPDATE calls SET {assignments}, updated_at = ? WHERE call_id = ?",
                (*changes.values(), at, event.call_id),
            )

    def record(self, *events: Event) -> None:
        durable = not all(event.kind in DEFERRED_KINDS for event in events)
        with self._readable(), self.database.transaction(durable=durable) as db:
            for event in events:
                self._append(db, event)

    def claim(
        self,
        ident: CallIdentity,
        *,
        ref: str,
        owner: Owner,
        lease_seconds: float = DEFAULT_LEASE_S,
        args: BaseModel | None = None,
        source: dict[str, str] | None = None,
    ) -> Claim:
        execution_id = uuid.uuid4().hex
        # Not flushed: nothing takes effect on a claim alone; the call's durable ``prepared``
        # record comes before its publish, and carries the claim to the disk with it.
        with self._readable(), self.database.transaction(durable=False) as db:
            now = time.time()
            lease = Lease.starting(now, lease_seconds)
            row = self._find(db, ident.call_id)
            if row is None:
                self._insert_call(db, ident, ref)
                self._append(
                    db,
                    first_claim(
                        ident,
                        ref=ref,
                        owner=owner,
                        lease=lease,
                        execution_id=execution_id,
                        args=args,
                        source=source,
                    ),
                )
                return Claim("run", execution_id, None)
            claim, event = judge_claim(
                row, ident, ref=ref, owner=owner, lease=lease, execution_id=execution_id, now=now
            )
            if event is not None:
                self._append(db, event)
            return claim

    def reopen(
        self,
        call_id: str,
        *,
        owner: Owner,
        rejected: str,
        lease_seconds: float = DEFAULT_LEASE_S,
        data: Mapping[str, Any] | None = None,
    ) -> Claim | None:
        execution_id = uuid.uuid4().hex
        with self._readable(), self.database.transaction() as db:
            lease = Lease.starting(time.time(), lease_seconds)
            judged = judge_reopen(
                self._find(db, call_id),
                owner,
                execution_id,
                rejected=rejected,
                lease=lease,
                data=data,
            )
            if judged is None:
                return None
            self._append(db, judged[1])
            return judged[0]

    def take_over(
        self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> str | None:
        return self.take_over_many([call_id], owner, lease_seconds=lease_seconds).get(call_id)

    def take_over_many(
        self, call_ids: Iterable[str], owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> dict[str, str]:
        taken: dict[str, str] = {}
        # Not flushed: nothing takes effect on a claim alone; the call's durable ``prepared``
        # record (or recover's settling record) comes before anything takes effect, and carries
        # the claim to the disk with it.
        with self._readable(), self.database.transaction(durable=False) as db:
            now = time.time()
            lease = Lease.starting(now, lease_seconds)
            wanted = list(dict.fromkeys(call_ids))
            rows = self._find_many(db, wanted)
            for call_id in wanted:
                execution_id = uuid.uuid4().hex
                event = judge_take_over(
                    rows.get(call_id), owner, execution_id, lease=lease, now=now
                )
                if event is not None:
                    self._append(db, event)
                    taken[call_id] = execution_id
        return taken

    def events_of(self, call_ids: Iterable[str]) -> dict[str, list[LoggedEvent]]:
        wanted = sorted(set(call_ids))
        found: dict[str, list[LoggedEvent]] = {}
        sql = "SELECT seq, call_id, execution_id, kind, at, data FROM events WHERE call_id IN"
        # In chunks: SQLite bounds the number of parameters of one statement.
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            with self._readable():
                rows = self.db.execute(
                    f"{sql} ({','.join('?' * len(chunk))}) ORDER BY seq", chunk
                ).fetchall()
            for row in rows:
                event = self._event(*row)
                found.setdefault(event.call_id, []).append(event)
        return found

    def renew(self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S) -> bool:
        with self._readable(), self.database.side_transaction() as db:
            lease = Lease.starting(time.time(), lease_seconds)
            change = judge_renew(self._find(db, call_id), owner, lease)
            if change is None:
                return False
            columns = change.columns()
            assignments = ", ".join(f"{col} = ?" for col in columns)
            # Not an event, and not an update of the row's state: updated_at stays.
            db.execute(
                f"UPDATE calls SET {assignments} WHERE call_id = ?", (*columns.values(), call_id)
            )
            return True

    def release(self, call_id: str, *, by: Owner, note: str = "") -> CallRow:
        with self._readable(), self.database.transaction() as db:
            row = self._find(db, call_id)
            self._append(db, judge_release(row, call_id, by=by, note=note))
            assert row is not None  # judge_release refuses a call with no row
            return row

    def ensure_row(
        self, ident: CallIdentity, ref: str, *, reason: str, change: RowChange = NO_CHANGE
    ) -> bool:
        with self._readable(), self.database.transaction() as db:
            if db.execute("SELECT 1 FROM calls WHERE call_id = ?", (ident.call_id,)).fetchone():
                return False
            self._insert_call(db, ident, ref)
            execution_id = change.execution_id if isinstance(change.execution_id, str) else None
            if change.state is UNSET:
                change = dataclasses.replace(change, state="new")
            self._append(
                db,
                Event(
                    ident.call_id,
                    execution_id,
                    EventKind.ADOPTED,
                    change,
                    {**identity_data(ident, ref), "reason": reason},
                ),
            )
            return True

    def _insert_call(self, db: sqlite3.Connection, ident: CallIdentity, ref: str) -> None:
        at = now()
        db.execute(
            "INSERT INTO calls (call_id, state, args_sha256, idempotency_key, ref,"
            " created_at, updated_at) VALUES (?, 'new', ?, ?, ?, ?, ?)",
            (ident.call_id, ident.args_sha256, ident.idempotency_key, ref, at, at),
        )
