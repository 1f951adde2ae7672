"""The ledger (docs/design.md §5): the record of every call — its events, and the state they lead
to.

:class:`Ledger` is the seam: what applyonce needs of a ledger, whatever keeps it (a clone's own
SQLite file, :class:`applyonce.state.sqlite.ledger.SqliteLedger`, or a PostgreSQL database that
clones share, :class:`applyonce.state.postgres.ledger.PostgresLedger`). Its contract, which
``tests/state/test_ledger_contract.py`` runs against every implementation:

* ``claim`` decides atomically who executes a call: of any number of processes racing on one
  ``call_id``, exactly one gets ``run``; the others get ``replay`` (terminal), ``unknown``, or
  :class:`CallBusyError` (its owner's lease holds). A claim is a lease
  (:mod:`applyonce.state.lease`): renewed by its owner (``renew``), taken over once it ended
  whatever host made it, or at once when its owner is a dead process on this host, in this PID
  namespace and boot; ``release`` frees one by hand.
* ``record`` appends events and applies the row changes they carry, all in one transaction.
* ``events`` are append-only and each carries the columns it set (``data["set"]``), so the
  current rows can be rebuilt from the events alone (:func:`fold_events`).

Events are typed (:class:`EventKind`), and so are the row changes they carry (:class:`RowChange`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import ReceiptError
from applyonce.errors import ConflictError, StateError
from applyonce.state.lease import (
    DEFAULT_LEASE_S,
    ClaimStillHeldError,
    Lease,
    NothingToReleaseError,
    hold_of,
)
from applyonce.state.lease import Owner as Owner  # re-exported: a claim's owner is a ledger term

IN_FLIGHT = ("claimed", "prepared")
TERMINAL = ("committed", "rejected")


class EventKind(enum.StrEnum):
    """What happened to a call (the ``kind`` of its events, in the order they usually come)."""

    CLAIMED = "claimed"
    # A stored rejection that depends on the repository, run again on a branch tip other than
    # the one it was rejected at: the claim goes from rejected back to claimed (see reopen).
    REEVALUATED = "reevaluated"
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
    RELEASED = "released"  # a claim freed by hand ('applyonce resolve --release')
    SYNCED = "synced"


# Events whose loss in a power cut costs nothing: a call's progress between its durable
# ``prepared`` record and its publish (what recovery decides by asking Git, never by these), and
# a checkout sync (``recover`` syncs a call again, which writes nothing when it was done). A
# ledger may record them without flushing; they reach the disk with the next durable record.
DEFERRED_KINDS = frozenset(
    {EventKind.STAGED, EventKind.CHECKED, EventKind.COMMIT_OBJECT, EventKind.SYNCED}
)


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
    owner: Owner | _Unset | None = UNSET
    lease: Lease | _Unset | None = UNSET

    def columns(self) -> dict[str, Any]:
        """The change as column values (booleans as 0/1, the owner as its five columns, the
        lease as two)."""
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
                "owner_pidns": self.owner.pidns,
                "owner_boot": self.owner.boot,
            }
        elif self.owner is None:
            out |= {
                "owner_pid": None,
                "owner_host": None,
                "owner_start": None,
                "owner_pidns": None,
                "owner_boot": None,
            }
        if isinstance(self.lease, Lease):
            out |= {"lease_expires_at": self.lease.expires_at, "lease_seconds": self.lease.seconds}
        elif self.lease is None:
            out |= {"lease_expires_at": None, "lease_seconds": None}
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
    # When the owner's claim ends unless renewed (None: written before leases, or released).
    lease: Lease | None = None


@dataclass(frozen=True)
class Claim:
    """The outcome of :meth:`Ledger.claim`.

    ``run``: this process executes under ``execution_id``. ``replay``: the call is terminal; return
    its receipt. ``takeover``: its previous owner died mid-call (or its lease ended, or it was
    released); reconcile with Git before running.
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
        lease_seconds: float = DEFAULT_LEASE_S,
        args: BaseModel | None = None,
        source: dict[str, str] | None = None,
    ) -> Claim:
        """Atomically decide who executes ``ident``; a claim it gives holds for
        ``lease_seconds`` unless renewed.

        Raises:
            CallBusyError: the claim of another process holds (see :func:`hold_of`).
            KeyReusedError: the idempotency key was used with other arguments.
        """
        ...

    def reopen(
        self,
        call_id: str,
        *,
        owner: Owner,
        rejected: str,
        lease_seconds: float = DEFAULT_LEASE_S,
        data: Mapping[str, Any] | None = None,
    ) -> Claim | None:
        """Claim again a call whose final rejection (execution ``rejected``) is to be judged
        anew, in one ``reevaluated`` event carrying ``data``: of any number of processes
        reopening one rejection, exactly one gets the ``run`` claim. None: the call is no longer
        that rejection (another process reopened it first, or it changed since it was read)."""
        ...

    def take_over(
        self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> str | None:
        """Take an in-flight call whose claim no longer holds (for recovery). Returns the new
        execution ID, or None if the call is terminal or its claim holds."""
        ...

    def take_over_many(
        self, call_ids: Iterable[str], owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> dict[str, str]:
        """:meth:`take_over` of each of ``call_ids``, all in one transaction (recovery of many
        calls). Returns call ID → new execution ID for the calls taken; the others (terminal,
        unknown to the ledger, or their claim holds) are left out."""
        ...

    def events_of(self, call_ids: Iterable[str]) -> dict[str, list[LoggedEvent]]:
        """The events of each of ``call_ids``, in the order they were recorded, in one read
        (a call without events is left out)."""
        ...

    def renew(self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S) -> bool:
        """Extend ``owner``'s claim on ``call_id`` to ``lease_seconds`` from now; False if the
        call is not in flight under that owner any more. Not an event: a lease is liveness, not
        history. May be called from any thread (the heartbeat's), while another uses the ledger."""
        ...

    def release(self, call_id: str, *, by: Owner, note: str = "") -> CallRow:
        """Free the claim on an in-flight call by hand, in one ``released`` event; the next
        claim takes the call over and settles it through Git. Returns the row as it was.

        Raises:
            NothingToReleaseError: no such call, or it is not in flight.
            ClaimStillHeldError: its owner provably runs on this host.
        """
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

    def get_many(self, call_ids: Iterable[str]) -> dict[str, CallRow]:
        """The rows of ``call_ids`` that exist, by call ID (one query, not one a call)."""
        ...

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


# Which repository a ledger serves, recorded by the first process that opens it for one: a
# table of one row. Named alike in both ledgers (a version reading either finds the same names).
REPOSITORY_MIGRATION = (
    "0007_repository",
    "CREATE TABLE repository (id TEXT PRIMARY KEY, recorded_at TEXT NOT NULL)",
)


class OtherRepositoryError(StateError):
    """The ledger serves another repository: its calls are not this repository's to settle."""

    kind = "ledger-of-another-repository"
    exit_code = 2


def check_repository(recorded: str | None, ours: str, where: str) -> None:
    """Make sure the ledger at ``where``, which records ``recorded`` (None: nothing yet) as
    its repository, serves ``ours``.

    Raises:
        OtherRepositoryError: it serves another repository.
    """
    if recorded is None or recorded == ours:
        return
    raise OtherRepositoryError(
        f"the ledger {where} serves another repository ({recorded}), not this one ({ours}):"
        " its calls are not this repository's to settle",
        hint="give each repository a ledger of its own (a --state-dir of its own; a fleet's"
        " clones share the remote's repository through a PostgreSQL ledger)",
        recorded=recorded,
        repository=ours,
    )


def pending_migrations(
    migrations: Iterable[tuple[str, str]], done: set[str]
) -> Iterator[tuple[str, list[str]]]:
    """The named migrations not yet in ``done``, in order, each with its SQL statements (what
    every ledger applies, in one transaction, under its own lock)."""
    for name, sql in migrations:
        if name not in done:
            yield name, [statement for statement in sql.split(";") if statement.strip()]


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


def claimed_data(
    ledger: Ledger, call_id: str, key: str, *, events: list[LoggedEvent] | None = None
) -> Any:
    """``key`` of the first event that recorded it when creating the call's row (its identity,
    normalised args, or patch source), or None. ``events``: the call's, read already."""
    for event in ledger.events(call_id) if events is None else events:
        if event.kind in (EventKind.CLAIMED, EventKind.ADOPTED) and event.data.get(key):
            return event.data[key]
    return None


def recorded_identity(
    ledger: Ledger, call_id: str, *, events: list[LoggedEvent] | None = None
) -> CallIdentity:
    """The identity the event that created the call's row recorded (``events``: the call's,
    read already).

    Raises:
        ReceiptError: no event records it.
        LedgerError: what it records is not an identity.
    """
    identity = claimed_data(ledger, call_id, "identity", events=events)
    if identity:
        # Read back from any Ledger, so untrusted: a row of the wrong shape is a one-line error.
        try:
            return CallIdentity.model_validate(identity)
        except ValidationError:
            raise LedgerError(
                f"call {call_id[:12]}'s recorded identity is not an identity", call_id=call_id
            ) from None
    raise ReceiptError(
        f"call {call_id[:12]} has neither a receipt nor a recorded identity", call_id=call_id
    )


# --- decisions every Ledger makes the same way (its storage makes them atomic) ----------------


def first_claim(
    ident: CallIdentity,
    *,
    ref: str,
    owner: Owner,
    lease: Lease,
    execution_id: str,
    args: BaseModel | None,
    source: dict[str, str] | None,
) -> Event:
    """The event that claims a call the ledger has never seen."""
    return Event(
        ident.call_id,
        execution_id,
        EventKind.CLAIMED,
        RowChange(state="claimed", execution_id=execution_id, owner=owner, lease=lease),
        {
            **identity_data(ident, ref),
            "args": args.model_dump(mode="json") if args is not None else None,
            # The patch as sent: re-parsing it recovers what the args dump leaves out (unified
            # line hints), so a reconciled receipt is the original one.
            "source": source,
        },
    )


def judge_claim(
    row: CallRow,
    ident: CallIdentity,
    *,
    ref: str,
    owner: Owner,
    lease: Lease,
    execution_id: str,
    now: float,
) -> tuple[Claim, Event | None]:
    """What a claim of a call the ledger knows (``row``) gets at ``now``, and the event to record
    for it. An in-flight call is taken over when its claim no longer holds (:func:`hold_of`):
    its owner is this process (an earlier apply here that failed halfway: the caller runs each
    call at most once at a time per process), a dead process here (this host, PID namespace and
    boot), its lease ended, or it was released.

    Raises:
        KeyReusedError: the key was used with other arguments.
        CallBusyError: the claim holds.
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
    if row.state in IN_FLIGHT:
        hold = hold_of(row, owner, now=now, lease_seconds=lease.seconds)
        if hold is not None:
            raise CallBusyError(
                hold.message,
                hint=hold.hint,
                call_id=row.call_id,
                pid=hold.owner.pid,
                host=hold.owner.host,
                lease_expires_at=hold.until,
            )
    # Only a retryable rejection simply runs again; anything else (in flight, or a state this
    # version does not know) is settled through Git first.
    outcome: Literal["run", "takeover"] = "run" if row.state == "rejected" else "takeover"
    event = Event(
        ident.call_id,
        execution_id,
        EventKind.CLAIMED,
        RowChange(
            state="claimed", execution_id=execution_id, retryable=False, owner=owner, lease=lease
        ),
        {"previous_state": row.state, "previous_execution_id": row.execution_id},
    )
    return Claim(outcome, execution_id, row), event


def judge_reopen(
    row: CallRow | None,
    owner: Owner,
    execution_id: str,
    *,
    rejected: str,
    lease: Lease,
    data: Mapping[str, Any] | None,
) -> tuple[Claim, Event] | None:
    """The claim and event that reopen the final rejection ``rejected`` (None: the row is not
    that rejection any more). The row is compared by its execution ID, so two reopeners of one
    rejection cannot both win: the first changes it."""
    if row is None or row.state != "rejected" or row.execution_id != rejected:
        return None
    event = Event(
        row.call_id,
        execution_id,
        EventKind.REEVALUATED,
        RowChange(
            state="claimed", execution_id=execution_id, retryable=False, owner=owner, lease=lease
        ),
        {"previous_state": row.state, "previous_execution_id": row.execution_id, **(data or {})},
    )
    return Claim("run", execution_id, row), event


def judge_take_over(
    row: CallRow | None, owner: Owner, execution_id: str, *, lease: Lease, now: float
) -> Event | None:
    """The event that takes over an in-flight call whose claim no longer holds (None: it may
    not be taken)."""
    if row is None or row.state not in IN_FLIGHT:
        return None
    if hold_of(row, owner, now=now, lease_seconds=lease.seconds) is not None:
        return None
    return Event(
        row.call_id,
        execution_id,
        EventKind.RECOVERING,
        RowChange(execution_id=execution_id, owner=owner, lease=lease),
        {"previous_execution_id": row.execution_id},
    )


def judge_renew(row: CallRow | None, owner: Owner, lease: Lease) -> RowChange | None:
    """The row change that renews ``owner``'s claim (None: it is no longer ``owner``'s)."""
    if row is None or row.state not in IN_FLIGHT or row.owner != owner:
        return None
    return RowChange(lease=lease)


def judge_release(row: CallRow | None, call_id: str, *, by: Owner, note: str) -> Event:
    """The event that frees a claim by hand: no owner, no lease; state and execution kept, so
    the next claim takes the call over and asks Git what happened.

    Raises:
        NothingToReleaseError: no such call, or it is not in flight.
        ClaimStillHeldError: its owner provably runs on this host.
    """
    short = call_id[:12]
    if row is None:
        raise NothingToReleaseError(f"no call {short} in the ledger")
    if row.state not in IN_FLIGHT:
        raise NothingToReleaseError(f"call {short} is {row.state}; it holds no claim to release")
    if row.owner is None:
        raise NothingToReleaseError(
            f"call {short}'s claim is free already",
            hint="repeat the call, or run 'applyonce recover', to settle it through Git",
        )
    if row.owner is not None and row.owner.provably_alive() and row.owner != by:
        raise ClaimStillHeldError(
            f"call {short} is held by {row.owner.describe()}, which is running on this host",
            call_id=call_id,
            pid=row.owner.pid,
        )
    return Event(
        call_id,
        row.execution_id,
        EventKind.RELEASED,
        RowChange(owner=None, lease=None),
        {
            "note": " ".join(note.split()),
            "previous_owner": None if row.owner is None else row.owner.as_dict(),
            "lease_expires_at": None if row.lease is None else row.lease.expires_at,
            "by": by.as_dict(),
        },
    )
