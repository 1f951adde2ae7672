"""The ledger (DESIGN §5): SQLite, WAL, ``synchronous=FULL``.

``events`` is append-only; ``calls`` is the current state of each call. Every event and the state
change it causes are written in one transaction, and each event carries the columns it set, so
``calls`` can be rebuilt from ``events`` alone (:meth:`Ledger.rebuild_calls`).

Claiming is one ``BEGIN IMMEDIATE`` transaction on ``calls``: of any number of processes racing on
one ``call_id``, exactly one gets to execute. A claim records its owner (pid, host, process start
time); a claim whose owner is gone can be taken over.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel

from applyonce.errors import ApplyOnceError, ConflictError, StateError
from applyonce.fsutil import ensure_dir
from applyonce.identity import CallIdentity
from applyonce.receipts import now

IN_FLIGHT = ("claimed", "prepared")
TERMINAL = ("committed", "rejected")

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
]


class LedgerError(StateError):
    kind = "ledger-unreadable"
    default_hint = "move the ledger file aside and run 'applyonce recover' to rebuild the record"


class LedgerBusyError(ConflictError):
    kind = "ledger-busy"
    default_retryable = True
    default_hint = "another applyonce process holds the ledger; retry in a moment"


def _ledger_error(path: Path, exc: sqlite3.Error) -> ApplyOnceError:
    if "locked" in str(exc) or "busy" in str(exc):
        return LedgerBusyError(f"the ledger {path} is busy ({exc})")
    return LedgerError(f"the ledger {path} is unreadable ({exc})")


class CallBusyError(ConflictError):
    kind = "call-running"
    default_retryable = True
    default_hint = "wait for it to finish, then repeat the call to get its result"


class KeyReusedError(ConflictError):
    kind = "idempotency-key-reused"
    default_hint = "use a new --idempotency-key for a different patch"


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    start: str

    @classmethod
    def me(cls) -> Owner:
        return cls(os.getpid(), socket.gethostname(), _process_start(os.getpid()) or "")

    def alive(self) -> bool:
        if self.host != socket.gethostname():
            return True  # cannot tell from here: assume it runs
        start = _process_start(self.pid)
        return start is not None and (not self.start or start == self.start)


def _process_start(pid: int) -> str | None:
    """The start time of ``pid`` (clock ticks since boot), so a reused pid is not taken as alive."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        return fields[19].decode()
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""


@dataclass(frozen=True)
class CallRow:
    call_id: str
    state: str
    execution_id: str | None
    args_sha256: str
    idempotency_key: str | None
    ref: str
    base_commit: str | None
    commit_id: str | None
    exit_code: int | None
    retryable: bool
    receipt_sha256: str | None
    synced: bool
    owner: Owner | None
    updated_at: str


@dataclass(frozen=True)
class Claim:
    """The outcome of :meth:`Ledger.claim`.

    ``run``: this process executes under ``execution_id``. ``replay``: the call is terminal; return
    its receipt. ``takeover``: its previous owner died mid-call; reconcile with Git before running.
    ``unknown``: a person must resolve it.
    """

    outcome: Literal["run", "replay", "takeover", "unknown"]
    execution_id: str
    row: CallRow | None


class Ledger:
    def __init__(self, path: Path) -> None:
        self.path = path
        ensure_dir(path.parent)
        # Switching a new database to WAL and migrating it are serialised between processes: two
        # first-time openers would otherwise get SQLITE_BUSY without waiting.
        lock = os.open(path.parent / "ledger.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self.db = sqlite3.connect(path, timeout=60, isolation_level=None)
            self.db.execute("PRAGMA busy_timeout = 60000")
            mode = self.db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            self.db.execute("PRAGMA synchronous = FULL")
            if mode != "wal":
                raise sqlite3.DatabaseError(f"journal mode is {mode}, not wal")
            self._migrate()
        except sqlite3.Error as exc:
            raise _ledger_error(path, exc) from None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(lock)

    @classmethod
    def empty(cls, path: Path) -> Ledger:
        """An in-memory ledger with no calls, for reading a repository that has no state yet
        without creating any."""
        ledger = cls.__new__(cls)
        ledger.path = path
        ledger.db = sqlite3.connect(":memory:", isolation_level=None)
        ledger._migrate()
        return ledger

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``: one writer at a time, all or nothing."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise _ledger_error(self.path, exc) from None
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and (
                "locked" in str(exc) or "disk" in str(exc) or "busy" in str(exc)
            ):
                raise _ledger_error(self.path, exc) from None
            raise

    def _migrate(self) -> None:
        with self.transaction() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS migrations"
                " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in db.execute("SELECT name FROM migrations")}
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                for statement in filter(str.strip, sql.split(";")):
                    db.execute(statement)
                db.execute("INSERT INTO migrations VALUES (?, ?)", (name, now()))

    # --- reading ------------------------------------------------------------------------------

    def get(self, call_id: str) -> CallRow | None:
        row = self.db.execute("SELECT * FROM calls WHERE call_id = ?", (call_id,)).fetchone()
        return None if row is None else self._row(row)

    def calls(self, *, states: tuple[str, ...] | None = None) -> list[CallRow]:
        sql = "SELECT * FROM calls"
        params: tuple[str, ...] = ()
        if states:
            sql += f" WHERE state IN ({','.join('?' * len(states))})"
            params = states
        return [
            self._row(r) for r in self.db.execute(sql + " ORDER BY created_at, call_id", params)
        ]

    def unsynced_bases(self, ref: str) -> list[str]:
        """Base commits of committed calls on ``ref`` whose checkout sync has not happened."""
        rows = self.db.execute(
            "SELECT DISTINCT base_commit FROM calls WHERE state = 'committed' AND synced = 0"
            " AND ref = ? AND base_commit IS NOT NULL",
            (ref,),
        )
        return [r[0] for r in rows]

    def events(self, call_id: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT seq, call_id, execution_id, kind, at, data FROM events"
        rows = (
            self.db.execute(sql + " WHERE call_id = ? ORDER BY seq", (call_id,))
            if call_id
            else self.db.execute(sql + " ORDER BY seq")
        )
        return [
            {"seq": s, "call_id": c, "execution_id": e, "kind": k, "at": a, "data": orjson.loads(d)}
            for s, c, e, k, a, d in rows
        ]

    def _call_columns(self) -> list[str]:
        """The columns of ``calls`` (asked once per connection, not once per row)."""
        if not hasattr(self, "_columns"):
            cursor = self.db.execute("SELECT * FROM calls LIMIT 0")
            self._columns = [d[0] for d in cursor.description]
        return self._columns

    def _row(self, row: tuple[Any, ...]) -> CallRow:
        cols = self._call_columns()
        r = dict(zip(cols, row, strict=True))
        owner = (
            Owner(r["owner_pid"], r["owner_host"] or "", r["owner_start"] or "")
            if r["owner_pid"] is not None
            else None
        )
        return CallRow(
            call_id=r["call_id"],
            state=r["state"],
            execution_id=r["execution_id"],
            args_sha256=r["args_sha256"],
            idempotency_key=r["idempotency_key"],
            ref=r["ref"],
            base_commit=r["base_commit"],
            commit_id=r["commit_id"],
            exit_code=r["exit_code"],
            retryable=bool(r["retryable"]),
            receipt_sha256=r["receipt_sha256"],
            synced=bool(r["synced"]),
            owner=owner,
            updated_at=r["updated_at"],
        )

    # --- writing ------------------------------------------------------------------------------

    def _event(
        self,
        db: sqlite3.Connection,
        call_id: str,
        execution_id: str | None,
        kind: str,
        changes: dict[str, Any],
        extra: dict[str, Any] | None,
    ) -> None:
        at = now()
        data = {"set": changes, **(extra or {})}
        db.execute(
            "INSERT INTO events (call_id, execution_id, kind, at, data) VALUES (?, ?, ?, ?, ?)",
            (call_id, execution_id, kind, at, orjson.dumps(data).decode()),
        )
        if changes:
            assignments = ", ".join(f"{col} = ?" for col in changes)
            db.execute(
                f"UPDATE calls SET {assignments}, updated_at = ? WHERE call_id = ?",
                (*changes.values(), at, call_id),
            )

    def record(
        self,
        call_id: str,
        execution_id: str | None,
        kind: str,
        /,
        *,
        extra: dict[str, Any] | None = None,
        **changes: Any,
    ) -> None:
        """Append event ``kind`` and apply ``changes`` to the call's row, in one transaction."""
        with self.transaction() as db:
            self._event(db, call_id, execution_id, kind, changes, extra)

    def record_many(
        self, entries: list[tuple[str, str | None, str, dict[str, Any], dict[str, Any] | None]]
    ) -> None:
        """Several ``(call_id, execution_id, kind, changes, extra)`` events in one transaction."""
        with self.transaction() as db:
            for call_id, execution_id, kind, changes, extra in entries:
                self._event(db, call_id, execution_id, kind, changes, extra)

    def claim(
        self,
        ident: CallIdentity,
        *,
        ref: str,
        owner: Owner,
        args: BaseModel | None = None,
        source: dict[str, str] | None = None,
    ) -> Claim:
        """Atomically decide who executes ``ident``.

        Raises:
            CallBusyError: a live process holds the call.
            KeyReusedError: the idempotency key was used with other arguments.
        """
        execution_id = uuid.uuid4().hex
        owner_cols = {"owner_pid": owner.pid, "owner_host": owner.host, "owner_start": owner.start}
        with self.transaction() as db:
            found = db.execute("SELECT * FROM calls WHERE call_id = ?", (ident.call_id,)).fetchone()
            if found is None:
                self._insert_call(db, ident, ref)
                self._event(
                    db,
                    ident.call_id,
                    execution_id,
                    "claimed",
                    {"state": "claimed", "execution_id": execution_id, **owner_cols},
                    {
                        **self._identity_data(ident, ref),
                        "args": args.model_dump(mode="json") if args is not None else None,
                        # The patch as sent: re-parsing it recovers what the args dump leaves
                        # out (unified line hints), so a reconciled receipt is the original one.
                        "source": source,
                    },
                )
                return Claim("run", execution_id, None)
            row = self._row(found)
            if row.args_sha256 != ident.args_sha256 or row.ref != ref:
                raise KeyReusedError(
                    f"idempotency key {ident.idempotency_key!r} was already used for call "
                    f"{row.call_id[:12]} with other arguments",
                    call_id=row.call_id,
                )
            if row.state == "committed" or (row.state == "rejected" and not row.retryable):
                return Claim("replay", row.execution_id or "", row)
            if row.state == "unknown":
                return Claim("unknown", row.execution_id or "", row)
            # Held by this very process: the caller runs each call at most once at a time per
            # process (executor._running), so this is an earlier apply here that failed halfway
            # (an exception, not a crash). That claim is as dead as a killed process's.
            stale_here = row.owner == owner
            if (
                row.state in IN_FLIGHT
                and row.owner is not None
                and row.owner.alive()
                and not stale_here
            ):
                raise CallBusyError(
                    f"call {row.call_id[:12]} is running in process {row.owner.pid}",
                    call_id=row.call_id,
                    pid=row.owner.pid,
                )
            # Only a retryable rejection simply runs again; anything else (in flight, or a state
            # this version does not know) is settled through Git first.
            outcome: Literal["run", "takeover"] = "run" if row.state == "rejected" else "takeover"
            self._event(
                db,
                ident.call_id,
                execution_id,
                "claimed",
                {"state": "claimed", "execution_id": execution_id, "retryable": 0, **owner_cols},
                {"previous_state": row.state, "previous_execution_id": row.execution_id},
            )
            return Claim(outcome, execution_id, row)

    def take_over(self, call_id: str, owner: Owner) -> str | None:
        """Take an in-flight call whose owner is gone (for recovery). Returns the new execution ID,
        or None if the call is terminal or a live process holds it."""
        execution_id = uuid.uuid4().hex
        with self.transaction() as db:
            found = db.execute("SELECT * FROM calls WHERE call_id = ?", (call_id,)).fetchone()
            if found is None:
                return None
            row = self._row(found)
            if row.state not in IN_FLIGHT:
                return None
            if row.owner is not None and row.owner.alive() and row.owner.pid != owner.pid:
                return None
            self._event(
                db,
                call_id,
                execution_id,
                "recovering",
                {
                    "execution_id": execution_id,
                    "owner_pid": owner.pid,
                    "owner_host": owner.host,
                    "owner_start": owner.start,
                },
                {"previous_execution_id": row.execution_id},
            )
            return execution_id

    def adopt_receipt(self, receipt: Any) -> CallRow | None:
        """Re-create the ledger row of a prepared receipt whose row was lost."""
        created = self.ensure_row(
            receipt.identity,
            receipt.ref,
            reason="prepared receipt without a ledger row",
            state="prepared",
            execution_id=receipt.execution_id,
            base_commit=receipt.base_commit,
        )
        return self.get(receipt.call_id) if created else None

    def source_of(self, call_id: str) -> dict[str, str] | None:
        """The patch text and format the call was first claimed with."""
        for event in self.events(call_id):
            if event["kind"] == "claimed" and event["data"].get("source"):
                source: dict[str, str] = event["data"]["source"]
                return source
        return None

    def args_of(self, call_id: str) -> dict[str, Any] | None:
        """The normalised args recorded when the call was first claimed."""
        for event in self.events(call_id):
            if event["kind"] == "claimed" and event["data"].get("args"):
                args: dict[str, Any] = event["data"]["args"]
                return args
        return None

    def unsynced_committed(self) -> list[CallRow]:
        return [
            self._row(r)
            for r in self.db.execute(
                "SELECT * FROM calls WHERE state = 'committed' AND synced = 0 ORDER BY updated_at"
            )
        ]

    def scanned_tip(self, ref: str) -> str | None:
        row = self.db.execute("SELECT tip FROM scanned WHERE ref = ?", (ref,)).fetchone()
        return None if row is None else str(row[0])

    def index_trailers(self, ref: str, found: list[tuple[str, str]], tip: str) -> None:
        """Record (call_id, commit) pairs seen on ``ref`` up to ``tip``."""
        with self.transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO trailer_index (ref, call_id, commit_id) VALUES (?, ?, ?)",
                [(ref, call, commit) for call, commit in found],
            )
            db.execute("INSERT OR REPLACE INTO scanned (ref, tip) VALUES (?, ?)", (ref, tip))

    def indexed_commits(self, ref: str, call_id: str) -> list[str]:
        rows = self.db.execute(
            "SELECT commit_id FROM trailer_index WHERE ref = ? AND call_id = ?", (ref, call_id)
        )
        return [str(r[0]) for r in rows]

    def indexed_calls(self, ref: str) -> dict[str, list[str]]:
        """Call-Id → commits, for every Call-Id seen on ``ref``."""
        found: dict[str, list[str]] = {}
        rows = self.db.execute("SELECT call_id, commit_id FROM trailer_index WHERE ref = ?", (ref,))
        for call_id, commit_id in rows:
            found.setdefault(str(call_id), []).append(str(commit_id))
        return found

    def ensure_row(self, ident: CallIdentity, ref: str, *, reason: str, **changes: Any) -> bool:
        """Create the row of a call whose record was lost (known from Git or a receipt), with
        ``changes`` applied; False if it has a row."""
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM calls WHERE call_id = ?", (ident.call_id,)).fetchone():
                return False
            self._insert_call(db, ident, ref)
            self._event(
                db,
                ident.call_id,
                changes.get("execution_id"),
                "adopted",
                {"state": "new", **changes},
                {**self._identity_data(ident, ref), "reason": reason},
            )
            return True

    def _insert_call(self, db: sqlite3.Connection, ident: CallIdentity, ref: str) -> None:
        at = now()
        db.execute(
            "INSERT INTO calls (call_id, state, args_sha256, idempotency_key, ref,"
            " created_at, updated_at) VALUES (?, 'new', ?, ?, ?, ?, ?)",
            (ident.call_id, ident.args_sha256, ident.idempotency_key, ref, at, at),
        )

    @staticmethod
    def _identity_data(ident: CallIdentity, ref: str) -> dict[str, Any]:
        """What an event that creates a row records of the call, so ``calls`` can be rebuilt."""
        return {
            "args_sha256": ident.args_sha256,
            "idempotency_key": ident.idempotency_key,
            "ref": ref,
            "identity": ident.model_dump(),
        }

    def rebuild_calls(self) -> dict[str, dict[str, Any]]:
        """The ``calls`` state derived from ``events`` alone (for replay and repair)."""
        state: dict[str, dict[str, Any]] = {}
        for event in self.events():
            row = state.setdefault(event["call_id"], {})
            for key in ("args_sha256", "idempotency_key", "ref"):
                if key in event["data"] and key not in row:
                    row[key] = event["data"][key]
            row.update(event["data"].get("set", {}))
        return state
