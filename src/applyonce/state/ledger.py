"""The ledger (DESIGN §5): the record of every call — its events, and the state they lead to.

:class:`Ledger` is the seam: what applyonce needs of a ledger, whatever keeps it (SQLite here,
:class:`applyonce.state.sqlite.ledger.SqliteLedger`; PostgreSQL later). Its contract, which
``tests/state/test_ledger_contract.py`` runs against every implementation:

* ``claim`` decides atomically who executes a call: of any number of processes racing on one
  ``call_id``, exactly one gets ``run``; the others get ``replay`` (terminal), ``unknown``, or
  :class:`CallBusyError` (a live owner holds it). A claim whose owner is gone is taken over.
* ``record`` appends events and applies the row changes they carry, all in one transaction.
* ``events`` are append-only and each carries the columns it set (``data["set"]``), so the
  current rows can be rebuilt from the events alone (:func:`fold_events`).

Events are typed (:class:`EventKind`), and so are the row changes they carry (:class:`RowChange`).
"""

from __future__ import annotations

import enum
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import ReceiptError
from applyonce.errors import ConflictError, StateError

IN_FLIGHT = ("claimed", "prepared")
TERMINAL = ("committed", "rejected")


class EventKind(enum.StrEnum):
    """What happened to a call (the ``kind`` of its events, in the order they usually come)."""

    CLAIMED = "claimed"
    ADOPTED = "adopted"  # a row re-created from a receipt or a commit, its record being lost
    PREPARED = "prepared"
    STAGED = "staged"
    APPROVED = "approved"
    DENIED = "denied"
    CHECKED = "checked"
    COMMIT_OBJECT = "commit-object"
    COMMITTED = "committed"
    REJECTED = "rejected"
    RECOVERING = "recovering"
    RECONCILED = "reconciled"
    REPAIRED = "repaired"
    UNKNOWN = "unknown"
    RESOLVED = "resolved"
    SYNCED = "synced"


class LedgerError(StateError):
    kind = "ledger-unreadable"
    default_hint = "move the ledger file aside and run 'applyonce recover' to rebuild the record"


class LedgerBusyError(ConflictError):
    kind = "ledger-busy"
    default_retryable = True
    default_hint = "another applyonce process holds the ledger; retry in a moment"


class CallBusyError(ConflictError):
    kind = "call-running"
    default_retryable = True
    default_hint = "wait for it to finish, then repeat the call to get its result"


class KeyReusedError(ConflictError):
    kind = "idempotency-key-reused"
    default_hint = "use a new --idempotency-key for a different patch"


@dataclass(frozen=True)
class Owner:
    """The process that holds a claim: pid, host, and the pid's start time (a reused pid is not
    the same owner)."""

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


class _Unset(enum.Enum):
    UNSET = "unset"


UNSET = _Unset.UNSET


@dataclass(frozen=True)
class RowChange:
    """The columns of a call's row an event sets (a field left :data:`UNSET` is not touched;
    None sets the column to null)."""

    state: str | _Unset = UNSET
    execution_id: str | _Unset | None = UNSET
    base_commit: str | _Unset | None = UNSET
    commit_id: str | _Unset | None = UNSET
    exit_code: int | _Unset | None = UNSET
    retryable: bool | _Unset = UNSET
    receipt_sha256: str | _Unset | None = UNSET
    synced: bool | _Unset = UNSET
    owner: Owner | _Unset = UNSET

    def columns(self) -> dict[str, Any]:
        """The change as column values (booleans as 0/1, the owner as its three columns)."""
        out: dict[str, Any] = {}
        for name in (
            "state",
            "execution_id",
            "base_commit",
            "commit_id",
            "exit_code",
            "retryable",
            "receipt_sha256",
            "synced",
        ):
            value = getattr(self, name)
            if value is not UNSET:
                out[name] = int(value) if isinstance(value, bool) else value
        if isinstance(self.owner, Owner):
            out |= {
                "owner_pid": self.owner.pid,
                "owner_host": self.owner.host,
                "owner_start": self.owner.start,
            }
        return out


NO_CHANGE = RowChange()


@dataclass(frozen=True)
class Event:
    """An event to record: what happened to a call, the row changes it makes, and its details."""

    call_id: str
    execution_id: str | None
    kind: EventKind
    change: RowChange = field(default_factory=RowChange)
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoggedEvent:
    """An event as the ledger holds it. ``kind`` stays a string: a newer version may have
    written kinds this one does not know."""

    seq: int
    call_id: str
    execution_id: str | None
    kind: str
    at: str
    data: dict[str, Any]


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


class Ledger(Protocol):
    """The record of calls (see the module docstring for the contract)."""

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
        ...

    def take_over(self, call_id: str, owner: Owner) -> str | None:
        """Take an in-flight call whose owner is gone (for recovery). Returns the new execution
        ID, or None if the call is terminal or a live process holds it."""
        ...

    def record(self, *events: Event) -> None:
        """Append ``events`` and apply their row changes, in one transaction."""
        ...

    def ensure_row(
        self, ident: CallIdentity, ref: str, *, reason: str, change: RowChange = NO_CHANGE
    ) -> bool:
        """Create the row of a call whose record was lost (known from Git or a receipt), with
        ``change`` applied, in one ``adopted`` event; False if it has a row."""
        ...

    def get(self, call_id: str) -> CallRow | None: ...

    def calls(self, *, states: tuple[str, ...] | None = None) -> list[CallRow]:
        """Every call (in ``states``, if given), oldest first."""
        ...

    def unsynced(self, ref: str | None = None) -> list[CallRow]:
        """Committed calls (on ``ref``, if given) whose checkout sync has not happened yet, oldest
        update first. Its cost follows those calls, not the whole ledger."""
        ...

    def events(self, call_id: str | None = None) -> list[LoggedEvent]:
        """The events of ``call_id`` (of every call, if None), in the order they were recorded."""
        ...

    def close(self) -> None: ...


def identity_data(ident: CallIdentity, ref: str) -> dict[str, Any]:
    """What an event that creates a row records of the call, so its row can be rebuilt."""
    return {
        "args_sha256": ident.args_sha256,
        "idempotency_key": ident.idempotency_key,
        "ref": ref,
        "identity": ident.model_dump(),
    }


def fold_events(events: Iterable[LoggedEvent]) -> dict[str, dict[str, Any]]:
    """The ``calls`` state derived from events alone (for replay and repair)."""
    state: dict[str, dict[str, Any]] = {}
    for event in events:
        row = state.setdefault(event.call_id, {})
        for key in ("args_sha256", "idempotency_key", "ref"):
            if key in event.data and key not in row:
                row[key] = event.data[key]
        row.update(event.data.get("set", {}))
    return state


def claimed_data(ledger: Ledger, call_id: str, key: str) -> Any:
    """``key`` of the first event that recorded it when creating the call's row (its identity,
    normalised args, or patch source), or None."""
    for event in ledger.events(call_id):
        if event.kind in (EventKind.CLAIMED, EventKind.ADOPTED) and event.data.get(key):
            return event.data[key]
    return None


def recorded_identity(ledger: Ledger, call_id: str) -> CallIdentity:
    """The identity the event that created the call's row recorded.

    Raises:
        ReceiptError: no event records it.
    """
    identity = claimed_data(ledger, call_id, "identity")
    if identity:
        return CallIdentity.model_validate(identity)
    raise ReceiptError(
        f"call {call_id[:12]} has neither a receipt nor a recorded identity", call_id=call_id
    )


# --- decisions every Ledger makes the same way (its storage makes them atomic) ----------------


def first_claim(
    ident: CallIdentity,
    *,
    ref: str,
    owner: Owner,
    execution_id: str,
    args: BaseModel | None,
    source: dict[str, str] | None,
) -> Event:
    """The event that claims a call the ledger has never seen."""
    return Event(
        ident.call_id,
        execution_id,
        EventKind.CLAIMED,
        RowChange(state="claimed", execution_id=execution_id, owner=owner),
        {
            **identity_data(ident, ref),
            "args": args.model_dump(mode="json") if args is not None else None,
            # The patch as sent: re-parsing it recovers what the args dump leaves out (unified
            # line hints), so a reconciled receipt is the original one.
            "source": source,
        },
    )


def judge_claim(
    row: CallRow, ident: CallIdentity, *, ref: str, owner: Owner, execution_id: str
) -> tuple[Claim, Event | None]:
    """What a claim of a call the ledger knows (``row``) gets, and the event to record for it.

    Raises:
        KeyReusedError: the key was used with other arguments.
        CallBusyError: a live process holds the call.
    """
    if row.args_sha256 != ident.args_sha256 or row.ref != ref:
        raise KeyReusedError(
            f"idempotency key {ident.idempotency_key!r} was already used for call "
            f"{row.call_id[:12]} with other arguments",
            call_id=row.call_id,
        )
    if row.state == "committed" or (row.state == "rejected" and not row.retryable):
        return Claim("replay", row.execution_id or "", row), None
    if row.state == "unknown":
        return Claim("unknown", row.execution_id or "", row), None
    # Held by this very process: the caller runs each call at most once at a time per process
    # (flow.apply), so this is an earlier apply here that failed halfway (an exception, not a
    # crash). That claim is as dead as a killed process's.
    if (
        row.state in IN_FLIGHT
        and row.owner is not None
        and row.owner.alive()
        and row.owner != owner
    ):
        raise CallBusyError(
            f"call {row.call_id[:12]} is running in process {row.owner.pid}",
            call_id=row.call_id,
            pid=row.owner.pid,
        )
    # Only a retryable rejection simply runs again; anything else (in flight, or a state this
    # version does not know) is settled through Git first.
    outcome: Literal["run", "takeover"] = "run" if row.state == "rejected" else "takeover"
    event = Event(
        ident.call_id,
        execution_id,
        EventKind.CLAIMED,
        RowChange(state="claimed", execution_id=execution_id, retryable=False, owner=owner),
        {"previous_state": row.state, "previous_execution_id": row.execution_id},
    )
    return Claim(outcome, execution_id, row), event


def judge_take_over(row: CallRow | None, owner: Owner, execution_id: str) -> Event | None:
    """The event that takes over an in-flight call whose owner is gone (None: it may not be)."""
    if row is None or row.state not in IN_FLIGHT:
        return None
    if row.owner is not None and row.owner.alive() and row.owner != owner:
        return None
    return Event(
        row.call_id,
        execution_id,
        EventKind.RECOVERING,
        RowChange(execution_id=execution_id, owner=owner),
        {"previous_execution_id": row.execution_id},
    )
