"""The PostgreSQL ledger: a :class:`applyonce.state.ledger.Ledger` that many hosts share.

The same tables, columns and named migrations as the SQLite ledger, in PostgreSQL's dialect, plus
``receipts`` (a :class:`applyonce.state.receipts.ReceiptMirror`: every clone sees every clone's
receipts). A claim inserts the call's row with ``INSERT … ON CONFLICT (call_id) DO NOTHING`` and
decides on it under ``SELECT … FOR UPDATE``, in one transaction; events and the row changes they
carry are one transaction too. Every time is the database server's clock, read in the transaction
that uses it (leases end at its ``now`` plus their length, and :func:`hold_of` judges at its
``now``): the clocks of the clients do not matter. ``renew`` runs on a connection of its own, so
the heartbeat's thread renews while the call's thread works.

Commits are durable (``synchronous_commit`` on) except for the records whose loss costs nothing
(claims, takeovers and :data:`DEFERRED_KINDS`): those commit with ``synchronous_commit = off``
and reach the disk with the next durable commit, as the WAL is written in order.

A connection lost mid-call is not retried: the error ends the call as a crash would, and the call,
in flight in the ledger, is settled later through Git. The next use reconnects.

One database may serve several repositories, each independent of the others: a ledger opened for
a repository (its identity: :meth:`applyonce.git.remote.RemotePublisher.repository_id`, the same
in every clone of one remote) keeps its tables in the ``public`` schema if that repository was
the first to use the database (recorded in the ``repository`` table on first use, as the tables
of a version before this one are adopted by the first repository that opens them), else in a
schema of its own, ``applyonce_<digest of the identity>``. So a repository's ``recover`` only
ever sees, and settles, its own calls against its own branch, and one patch sent to two
repositories is two calls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import orjson
import psycopg
from pydantic import BaseModel

from applyonce.core.identity import CallIdentity
from applyonce.state.lease import DEFAULT_LEASE_S, Lease, stamp
from applyonce.state.ledger import (
    DEFERRED_KINDS,
    NO_CHANGE,
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
from applyonce.state.postgres.connection import (
    DEFAULT_CONNECT_TIMEOUT_S,
    MIGRATION_LOCK,
    connect,
    describe,
    errors_of,
    migrate,
    parse_url,
    use_schema,
)
from applyonce.state.postgres.schema import MIGRATIONS
from applyonce.state.rows import call_row, logged_event, malformed

Cursor = psycopg.Cursor[tuple[Any, ...]]
_EVENT_COLUMNS = "seq, call_id, execution_id, kind, at, data"


def _at(now: float) -> str:
    """A row's or event's time stamp, from the server's clock (a hook for the tests)."""
    return stamp(now)


class PostgresLedger:
    """The shared ledger. See :class:`applyonce.state.ledger.Ledger` for the contract.

    Raises (on opening):
        LedgerUnavailableError: the server cannot be reached within ``connect_timeout``.
        InvalidLedgerUrlError: ``url`` is not a libpq URL.
    """

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_S,
        repository: Callable[[], str] | None = None,
    ) -> None:
        self._params = parse_url(url, connect_timeout)
        self._secret = self._params.get("password")
        self.where = describe(self._params)
        self.path = self.where  # what messages name the ledger by
        self.schema = "public"
        self._side: psycopg.Connection[tuple[Any, ...]] | None = None
        self._side_lock = threading.Lock()
        self._db: psycopg.Connection[tuple[Any, ...]] | None = self._connect()
        try:
            if repository is None:
                migrate(self._db, MIGRATIONS, self.where)
            else:
                # Asked once the server answered: naming the repository may write (its
                # identity, made on first use), which a ledger that cannot be used must not.
                name = repository()
                self._serve(name, self._schema_of(name))
        except BaseException:
            self.close()
            raise

    def _connect(self) -> psycopg.Connection[tuple[Any, ...]]:
        conn = connect(self._params, self.where)
        if self.schema != "public":
            use_schema(conn, self.schema, self.where)
        return conn

    # --- which repository, which schema --------------------------------------------------------

    def _schema_of(self, repository: str) -> str:
        """Where ``repository``'s tables are: ``public`` if it recorded itself there, or if no
        repository did yet; else its own schema."""
        conn = self._main()
        with self._errors(conn):
            row = conn.execute("SELECT to_regclass('public.repository') IS NOT NULL").fetchone()
            if row is None or not row[0]:
                return "public"
            owner = conn.execute("SELECT id FROM public.repository").fetchone()
        return "public" if owner is None or owner[0] == repository else own_schema(repository)

    def _serve(self, repository: str, schema: str) -> None:
        """Use ``schema`` (migrated) for ``repository``, recording it there on first use. If
        another repository recorded itself in ``public`` first (two first openers racing), this
        one moves to a schema of its own.

        Raises:
            OtherRepositoryError: the schema serves another repository (a digest collision).
        """
        self.schema = schema
        conn = self._main()
        use_schema(conn, schema, self.where)
        migrate(conn, MIGRATIONS, self.where, schema=schema)
        with self._transaction() as (cur, now):
            # Under the lock of the migrations: two first openers record one repository.
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            cur.execute(
                "INSERT INTO repository (id, recorded_at) SELECT %s, %s"
                " WHERE NOT EXISTS (SELECT 1 FROM repository)",
                (repository, _at(now)),
            )
            cur.execute("SELECT id FROM repository ORDER BY recorded_at LIMIT 1")
            row = cur.fetchone()
        recorded = None if row is None else str(row[0])
        if recorded != repository and schema == "public":
            self._serve(repository, own_schema(repository))
            return
        check_repository(recorded, repository, f"{self.where} (schema {schema})")

    def close(self) -> None:
        for conn in (self._db, self._side):
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    conn.close()
        self._db = self._side = None

    # --- connections and transactions --------------------------------------------------------

    def _main(self) -> psycopg.Connection[tuple[Any, ...]]:
        """The connection of the call's thread; a new one if the last was lost (an earlier
        call's error ended that call; this is the next one, in a long-lived process)."""
        if self._db is None or self._db.closed or self._db.broken:
            self._db = self._connect()
        return self._db

    @contextlib.contextmanager
    def _errors(self, conn: psycopg.Connection[Any] | None = None) -> Iterator[None]:
        with errors_of(conn if conn is not None else self._db, self.where, self._secret):
            yield

    @contextlib.contextmanager
    def _transaction(
        self, *, durable: bool = True, conn: psycopg.Connection[Any] | None = None
    ) -> Iterator[tuple[Cursor, float]]:
        """One transaction, all or nothing, and the server's clock when it began its work
        (seconds since the epoch). ``durable=False``: committed without waiting for the disk."""
        conn = conn or self._main()
        with self._errors(conn), conn.transaction(), conn.cursor() as cur:
            if not durable:
                cur.execute("SET LOCAL synchronous_commit = off")
            yield cur, _server_now(cur)

    def _read(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        conn = self._main()
        with self._errors(conn):
            return conn.execute(sql, params).fetchall()

    # --- reading ------------------------------------------------------------------------------

    def get(self, call_id: str) -> CallRow | None:
        conn = self._main()
        with self._errors(conn), conn.cursor() as cur:
            return self._find(cur, call_id)

    def get_many(self, call_ids: Iterable[str]) -> dict[str, CallRow]:
        wanted = sorted(set(call_ids))
        if not wanted:
            return {}
        conn = self._main()
        with self._errors(conn), conn.cursor() as cur:
            cur.execute("SELECT * FROM calls WHERE call_id = ANY(%s)", (wanted,))
            rows = [self._row(cur, row) for row in cur.fetchall()]
        return {row.call_id: row for row in rows}

    def _find(self, cur: Cursor, call_id: str, *, lock: bool = False) -> CallRow | None:
        lock_clause = " FOR UPDATE" if lock else ""
        cur.execute(f"SELECT * FROM calls WHERE call_id = %s{lock_clause}", (call_id,))
        row = cur.fetchone()
        return None if row is None else self._row(cur, row)

    def _row(self, cur: Cursor, row: tuple[Any, ...]) -> CallRow:
        names = [d.name for d in cur.description or ()]
        return call_row(dict(zip(names, row, strict=True)), self.where)

    def _rows(self, sql: str, params: Any = ()) -> list[CallRow]:
        conn = self._main()
        with self._errors(conn), conn.cursor() as cur:
            cur.execute(sql, params)
            return [self._row(cur, r) for r in cur.fetchall()]

    def calls(self, *, states: tuple[str, ...] | None = None) -> list[CallRow]:
        if states:
            return self._rows(
                "SELECT * FROM calls WHERE state = ANY(%s) ORDER BY created_at, rowid",
                (list(states),),
            )
        return self._rows("SELECT * FROM calls ORDER BY created_at, rowid")

    def unsynced(self, ref: str | None = None) -> list[CallRow]:
        sql = "SELECT * FROM calls WHERE state = 'committed' AND synced = 0"
        if ref is None:
            return self._rows(sql + " ORDER BY updated_at, rowid")
        return self._rows(sql + " AND ref = %s ORDER BY updated_at, rowid", (ref,))

    def events(self, call_id: str | None = None) -> list[LoggedEvent]:
        sql = f"SELECT {_EVENT_COLUMNS} FROM events"
        rows = (
            self._read(sql + " WHERE call_id = %s ORDER BY seq", (call_id,))
            if call_id
            else self._read(sql + " ORDER BY seq")
        )
        return [logged_event(self.where, *row) for row in rows]

    def events_of(self, call_ids: Iterable[str]) -> dict[str, list[LoggedEvent]]:
        found: dict[str, list[LoggedEvent]] = {}
        rows = self._read(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE call_id = ANY(%s) ORDER BY seq",
            (sorted(set(call_ids)),),
        )
        for row in rows:
            event = logged_event(self.where, *row)
            found.setdefault(event.call_id, []).append(event)
        return found

    # --- writing ------------------------------------------------------------------------------

    def _append(self, cur: Cursor, event: Event, now: float) -> None:
        at = _at(now)
        changes = event.change.columns()
        data = {"set": changes, **event.data}
        cur.execute(
            "INSERT INTO events (call_id, execution_id, kind, at, data)"
            " VALUES (%s, %s, %s, %s, %s)",
            (event.call_id, event.execution_id, str(event.kind), at, orjson.dumps(data).decode()),
        )
        if changes:
            assignments = ", ".join(f"{col} = %s" for col in changes)
            cur.execute(
                f"UPDATE calls SET {assignments}, updated_at = %s WHERE call_id = %s",
                (*changes.values(), at, event.call_id),
            )

    def _insert_call(self, cur: Cursor, ident: CallIdentity, ref: str, now: float) -> bool:
        """Insert the call's row unless it has one; True if this inserted it."""
        at = _at(now)
        cur.execute(
            "INSERT INTO calls (call_id, state, args_sha256, idempotency_key, ref,"
            " created_at, updated_at) VALUES (%s, 'new', %s, %s, %s, %s, %s)"
            " ON CONFLICT (call_id) DO NOTHING RETURNING call_id",
            (ident.call_id, ident.args_sha256, ident.idempotency_key, ref, at, at),
        )
        return cur.fetchone() is not None

    def record(self, *events: Event) -> None:
        durable = not all(event.kind in DEFERRED_KINDS for event in events)
        with self._transaction(durable=durable) as (cur, now), cur.connection.pipeline():
            # Pipelined: a group's events (two statements each) go in one round trip, not one
            # a statement; an error still fails the whole transaction.
            for event in events:
                self._append(cur, event, now)

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
        with self._transaction(durable=False) as (cur, now):
            inserted = self._insert_call(cur, ident, ref, now)
            row = self._find(cur, ident.call_id, lock=True)
            # Read after the row's lock was granted: a wait for it must not age the decision.
            now = _server_now(cur)
            lease = Lease.starting(now, lease_seconds)
            if inserted:
                event = first_claim(
                    ident,
                    ref=ref,
                    owner=owner,
                    lease=lease,
                    execution_id=execution_id,
                    args=args,
                    source=source,
                )
                self._append(cur, event, now)
                return Claim("run", execution_id, None)
            if row is None:  # deleted by hand between the two statements
                raise malformed(self.where, "row (it vanished while claimed)", ident.call_id)
            claim, judged = judge_claim(
                row, ident, ref=ref, owner=owner, lease=lease, execution_id=execution_id, now=now
            )
            if judged is not None:
                self._append(cur, judged, now)
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
        with self._transaction() as (cur, _):
            row = self._find(cur, call_id, lock=True)
            now = _server_now(cur)
            judged = judge_reopen(
                row,
                owner,
                execution_id,
                rejected=rejected,
                lease=Lease.starting(now, lease_seconds),
                data=data,
            )
            if judged is None:
                return None
            self._append(cur, judged[1], now)
            return judged[0]

    def take_over(
        self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> str | None:
        return self.take_over_many([call_id], owner, lease_seconds=lease_seconds).get(call_id)

    def take_over_many(
        self, call_ids: Iterable[str], owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> dict[str, str]:
        taken: dict[str, str] = {}
        # Not flushed (as claim). Rows locked in one order: two recoveries cannot deadlock.
        with self._transaction(durable=False) as (cur, _):
            rows = [self._find(cur, call_id, lock=True) for call_id in sorted(set(call_ids))]
            now = _server_now(cur)
            lease = Lease.starting(now, lease_seconds)
            for row in rows:
                execution_id = uuid.uuid4().hex
                event = judge_take_over(row, owner, execution_id, lease=lease, now=now)
                if event is not None:
                    self._append(cur, event, now)
                    taken[event.call_id] = execution_id
        return taken

    def renew(self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S) -> bool:
        # The heartbeat's thread, on its own connection (the call's thread uses the main one).
        with self._side_lock:
            if self._side is None or self._side.closed or self._side.broken:
                self._side = self._connect()
            with self._transaction(conn=self._side) as (cur, _):
                row = self._find(cur, call_id, lock=True)
                change = judge_renew(row, owner, Lease.starting(_server_now(cur), lease_seconds))
                if change is None:
                    return False
                columns = change.columns()
                assignments = ", ".join(f"{col} = %s" for col in columns)
                # Not an event, and not an update of the row's state: updated_at stays.
                cur.execute(
                    f"UPDATE calls SET {assignments} WHERE call_id = %s",
                    (*columns.values(), call_id),
                )
                return True

    def release(self, call_id: str, *, by: Owner, note: str = "") -> CallRow:
        with self._transaction() as (cur, now):
            row = self._find(cur, call_id, lock=True)
            self._append(cur, judge_release(row, call_id, by=by, note=note), now)
            assert row is not None  # judge_release refuses a call with no row
            return row

    def ensure_row(
        self, ident: CallIdentity, ref: str, *, reason: str, change: RowChange = NO_CHANGE
    ) -> bool:
        with self._transaction() as (cur, now):
            if not self._insert_call(cur, ident, ref, now):
                return False
            execution_id = change.execution_id if isinstance(change.execution_id, str) else None
            if change.state is UNSET:
                change = dataclasses.replace(change, state="new")
            data = {**identity_data(ident, ref), "reason": reason}
            self._append(
                cur, Event(ident.call_id, execution_id, EventKind.ADOPTED, change, data), now
            )
            return True

    # --- the receipts mirror (applyonce.state.receipts.ReceiptMirror) -------------------------

    def put_receipt(self, call_id: str, sha256: str, body: bytes) -> None:
        """Store the receipt ``body`` of ``call_id`` (durably: a ledger row names it next)."""
        with self._transaction() as (cur, now):
            cur.execute(
                "INSERT INTO receipts (call_id, sha256, body, updated_at)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (call_id) DO UPDATE"
                " SET sha256 = EXCLUDED.sha256, body = EXCLUDED.body,"
                " updated_at = EXCLUDED.updated_at",
                (call_id, sha256, body, _at(now)),
            )

    def get_receipt(self, call_id: str) -> bytes | None:
        """The receipt body stored for ``call_id`` (None: none). Untrusted: the reader verifies
        it (its digest against the call's row, its content against itself and Git)."""
        rows = self._read("SELECT body FROM receipts WHERE call_id = %s", (call_id,))
        if not rows:
            return None
        body = rows[0][0]
        if not isinstance(body, bytes):
            raise malformed(self.where, "receipt", call_id)
        return body

    def receipt_ids(self) -> list[str]:
        """The calls with a stored receipt."""
        rows = self._read("SELECT call_id FROM receipts ORDER BY call_id")
        return [r[0] for r in rows if isinstance(r[0], str)]


def own_schema(repository: str) -> str:
    """The schema of a repository's tables in a database another repository uses first."""
    return "applyonce_" + hashlib.sha256(repository.encode()).hexdigest()[:32]


def _server_now(cur: Cursor) -> float:
    """The database server's clock now, in seconds since the epoch (``clock_timestamp``: not
    the transaction's start, which a wait for a row lock would make stale)."""
    cur.execute("SELECT extract(epoch FROM clock_timestamp())::float8")
    row = cur.fetchone()
    assert row is not None
    return float(row[0])
