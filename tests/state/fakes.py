"""An in-memory fake of the ledger seam, for tests of code above :mod:`applyonce.state`.

:class:`MemoryLedger` is a :class:`applyonce.state.ledger.Ledger` over a dict of rows and a list of
events. tests/state/test_ledger_contract.py holds it to the same contract as
:class:`applyonce.state.sqlite.ledger.SqliteLedger` on a real file: the same claim outcomes and
errors, each ``record`` all or nothing, and events that carry the columns they set
(``data["set"]``, booleans as 0/1, the owner as five columns) so :func:`fold_events` rebuilds the
rows. One lock serialises every operation, so threads may share one instance (the heartbeat's
``renew`` included).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import orjson
from pydantic import BaseModel

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import now
from applyonce.state.lease import DEFAULT_LEASE_S, Lease
from applyonce.state.ledger import (
    NO_CHANGE,
    UNSET,
    CallRow,
    Claim,
    Event,
    EventKind,
    LedgerError,
    LoggedEvent,
    Owner,
    RowChange,
    first_claim,
    identity_data,
    judge_claim,
    judge_release,
    judge_renew,
    judge_reopen,
    judge_take_over,
)
from applyonce.state.rows import call_row


@dataclasses.dataclass
class _Store:
    """What the ledger holds: rows as column dicts (as the SQLite ``calls`` table has them) and
    the events, in the order they were recorded."""

    rows: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    events: list[LoggedEvent] = dataclasses.field(default_factory=list)
    next_seq: int = 1

    def copy(self) -> _Store:
        return _Store({k: dict(v) for k, v in self.rows.items()}, list(self.events), self.next_seq)


class MemoryLedger:
    """A :class:`applyonce.state.ledger.Ledger` in memory. See that Protocol for the contract."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._store = _Store()
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True

    # --- reading ------------------------------------------------------------------------------

    def get(self, call_id: str) -> CallRow | None:
        with self._lock:
            self._check_open()
            found = self._store.rows.get(call_id)
            return None if found is None else _row(found)

    def get_many(self, call_ids: Iterable[str]) -> dict[str, CallRow]:
        with self._lock:
            self._check_open()
            rows = self._store.rows
            return {c: _row(rows[c]) for c in set(call_ids) if c in rows}

    def calls(self, *, states: tuple[str, ...] | None = None) -> list[CallRow]:
        with self._lock:
            self._check_open()
            rows = [r for r in self._store.rows.values() if not states or r["state"] in states]
            # Oldest first; a tie in the (millisecond) stamp keeps the order of creation (the dict
            # keeps insertion order and the sort is stable), as SqliteLedger's rowid does.
            rows.sort(key=lambda r: r["created_at"])
            return [_row(r) for r in rows]

    def unsynced(self, ref: str | None = None) -> list[CallRow]:
        with self._lock:
            self._check_open()
            rows = [
                r
                for r in self._store.rows.values()
                if r["state"] == "committed" and not r["synced"] and ref in (None, r["ref"])
            ]
            rows.sort(key=lambda r: r["updated_at"])
            return [_row(r) for r in rows]

    def events(self, call_id: str | None = None) -> list[LoggedEvent]:
        with self._lock:
            self._check_open()
            return [
                dataclasses.replace(e, data=_json_copy(e.data))
                for e in self._store.events
                if not call_id or e.call_id == call_id
            ]

    # --- writing ------------------------------------------------------------------------------

    def record(self, *events: Event) -> None:
        with self._transaction() as store:
            for event in events:
                _append(store, event)

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
        with self._transaction() as store:
            now = time.time()
            lease = Lease.starting(now, lease_seconds)
            found = store.rows.get(ident.call_id)
            if found is None:
                _insert_call(store, ident, ref)
                _append(
                    store,
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
                _row(found),
                ident,
                ref=ref,
                owner=owner,
                lease=lease,
                execution_id=execution_id,
                now=now,
            )
            if event is not None:
                _append(store, event)
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
        with self._transaction() as store:
            found = store.rows.get(call_id)
            judged = judge_reopen(
                None if found is None else _row(found),
                owner,
                execution_id,
                rejected=rejected,
                lease=Lease.starting(time.time(), lease_seconds),
                data=data,
            )
            if judged is None:
                return None
            _append(store, judged[1])
            return judged[0]

    def take_over(
        self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> str | None:
        return self.take_over_many([call_id], owner, lease_seconds=lease_seconds).get(call_id)

    def take_over_many(
        self, call_ids: Iterable[str], owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> dict[str, str]:
        taken: dict[str, str] = {}
        with self._transaction() as store:
            now = time.time()
            for call_id in call_ids:
                execution_id = uuid.uuid4().hex
                found = store.rows.get(call_id)
                event = judge_take_over(
                    None if found is None else _row(found),
                    owner,
                    execution_id,
                    lease=Lease.starting(now, lease_seconds),
                    now=now,
                )
                if event is not None:
                    _append(store, event)
                    taken[call_id] = execution_id
        return taken

    def events_of(self, call_ids: Iterable[str]) -> dict[str, list[LoggedEvent]]:
        wanted = set(call_ids)
        found: dict[str, list[LoggedEvent]] = {}
        for event in self.events():
            if event.call_id in wanted:
                found.setdefault(event.call_id, []).append(event)
        return found

    def renew(self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S) -> bool:
        with self._transaction() as store:
            found = store.rows.get(call_id)
            lease = Lease.starting(time.time(), lease_seconds)
            change = judge_renew(None if found is None else _row(found), owner, lease)
            if change is None or found is None:
                return False
            found.update(change.columns())  # no event, and updated_at stays
            return True

    def release(self, call_id: str, *, by: Owner, note: str = "") -> CallRow:
        with self._transaction() as store:
            found = store.rows.get(call_id)
            row = None if found is None else _row(found)
            _append(store, judge_release(row, call_id, by=by, note=note))
            assert row is not None  # judge_release refuses a call with no row
            return row

    def ensure_row(
        self, ident: CallIdentity, ref: str, *, reason: str, change: RowChange = NO_CHANGE
    ) -> bool:
        with self._transaction() as store:
            if ident.call_id in store.rows:
                return False
            _insert_call(store, ident, ref)
            execution_id = change.execution_id if isinstance(change.execution_id, str) else None
            if change.state is UNSET:
                change = dataclasses.replace(change, state="new")
            _append(
                store,
                Event(
                    ident.call_id,
                    execution_id,
                    EventKind.ADOPTED,
                    change,
                    {**identity_data(ident, ref), "reason": reason},
                ),
            )
            return True

    # --- internals ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise LedgerError("the in-memory ledger is closed")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[_Store]:
        """All or nothing: the body works on a copy, which replaces the store only if the body
        finishes without raising."""
        with self._lock:
            self._check_open()
            working = self._store.copy()
            yield working
            self._store = working


def _json_copy(data: Any) -> Any:
    """``data`` as JSON gives it back (what SqliteLedger's ``orjson`` round trip does); raises
    TypeError (``orjson.JSONEncodeError``) for what JSON cannot hold."""
    return orjson.loads(orjson.dumps(data))


def _append(store: _Store, event: Event) -> None:
    at = now()
    changes = event.change.columns()
    data = _json_copy({"set": changes, **event.data})
    store.events.append(
        LoggedEvent(store.next_seq, event.call_id, event.execution_id, str(event.kind), at, data)
    )
    store.next_seq += 1
    row = store.rows.get(event.call_id)
    if changes and row is not None:  # an UPDATE of a call with no row changes nothing
        row.update(changes)
        row["updated_at"] = at


def _insert_call(store: _Store, ident: CallIdentity, ref: str) -> None:
    at = now()
    store.rows[ident.call_id] = {
        "call_id": ident.call_id,
        "state": "new",
        "execution_id": None,
        "args_sha256": ident.args_sha256,
        "idempotency_key": ident.idempotency_key,
        "ref": ref,
        "base_commit": None,
        "commit_id": None,
        "exit_code": None,
        "retryable": 0,
        "receipt_sha256": None,
        "synced": 0,
        "owner_pid": None,
        "owner_host": None,
        "owner_start": None,
        "owner_pidns": None,
        "owner_boot": None,
        "lease_expires_at": None,
        "lease_seconds": None,
        "created_at": at,
        "updated_at": at,
    }


def _row(r: dict[str, Any]) -> CallRow:
    """A row as every ledger reads one back (the shared reader, so the fake cannot drift)."""
    return call_row(r, "the in-memory ledger")
