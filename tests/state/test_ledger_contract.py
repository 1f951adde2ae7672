"""The contract of :class:`applyonce.state.ledger.Ledger`, run against every implementation.

The same tests against :class:`applyonce.state.sqlite.ledger.SqliteLedger` on a file in tmp_path,
:class:`applyonce.state.postgres.ledger.PostgresLedger` on a fresh database of a real server (the
``pg_url`` fixture; skipped where PostgreSQL is not installed), and the fake
:class:`tests.state.fakes.MemoryLedger`: who gets to run a call, what replays,
what is taken over, ``record`` all or nothing, row changes (UNSET untouched, None null), events that
rebuild the rows, ``ensure_row``, ``calls`` and ``events``, and claims as leases (renewed,
taken over once ended whatever host made them, released by hand). Owners are real processes: a
live other one is the test runner's parent (or a helper process this test starts), a dead one a pid
above Linux's largest on this host; another host's process is one whose liveness cannot be told.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from applyonce.core.identity import CallIdentity
from applyonce.state.lease import (
    ClaimStillHeldError,
    Lease,
    NothingToReleaseError,
    _process_start,
    stamp,
)
from applyonce.state.ledger import (
    IN_FLIGHT,
    CallBusyError,
    CallRow,
    Event,
    EventKind,
    KeyReusedError,
    Ledger,
    LedgerError,
    Owner,
    RowChange,
    claimed_data,
    fold_events,
    recorded_identity,
)
from applyonce.state.sqlite.ledger import SqliteLedger
from tests.state.fakes import MemoryLedger

REF = "refs/heads/main"
IDENT = CallIdentity.compute("a" * 64)
ME = Owner.me()
DEAD = Owner.local(2**22 + 7, "1")  # above pid_max: never running
# A live process that is not this one: the test runner's parent.
PARENT = Owner.local(os.getppid(), _process_start(os.getppid()) or "")
# A process of another host (a machine, or a container since renamed): only its lease tells.
ELSEWHERE = Owner(ME.pid, "build-host-2.example.invalid", "12345")


@dataclasses.dataclass
class Backend:
    """One ledger implementation: ``session()`` opens a handle on the test's one ledger (a new
    connection for SQLite, which a thread cannot share, and for PostgreSQL; the same instance for
    the fake)."""

    name: str
    session: Callable[[], contextlib.AbstractContextManager[Ledger]]


@pytest.fixture(params=["sqlite", "postgres", "postgres-second-repository", "memory"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    if request.param.startswith("postgres"):
        from applyonce.state.postgres.ledger import PostgresLedger

        url = request.getfixturevalue("pg_url")
        repository = None
        if request.param == "postgres-second-repository":
            # Another repository used the database first: this one's tables are in a schema
            # of their own, and every statement of the contract must find them there.
            PostgresLedger(url, repository=lambda: "remote:first").close()
            repository = lambda: "remote:second"  # noqa: E731

        @contextlib.contextmanager
        def postgres_session() -> Iterator[Ledger]:
            ledger = PostgresLedger(url, repository=repository)
            try:
                yield ledger
            finally:
                ledger.close()

        return Backend(request.param, postgres_session)
    if request.param == "sqlite":

        @contextlib.contextmanager
        def sqlite_session() -> Iterator[Ledger]:
            ledger = SqliteLedger(tmp_path / "state" / "ledger.sqlite3")
            try:
                yield ledger
            finally:
                ledger.close()

        return Backend("sqlite", sqlite_session)
    shared = MemoryLedger()

    @contextlib.contextmanager
    def memory_session() -> Iterator[Ledger]:
        yield shared

    return Backend("memory", memory_session)


@pytest.fixture
def ledger(backend: Backend) -> Iterator[Ledger]:
    with backend.session() as opened:
        yield opened


def ident(n: int, *, key: str | None = None) -> CallIdentity:
    return CallIdentity.compute(f"{n:064x}", idempotency_key=key)


def row_of(ledger: Ledger, call_id: str) -> CallRow:
    row = ledger.get(call_id)
    assert row is not None, f"no row for {call_id[:12]}"
    return row


def kinds(ledger: Ledger, call_id: str | None = None) -> list[str]:
    return [e.kind for e in ledger.events(call_id)]


# --- claim --------------------------------------------------------------------------------------


def test_new_call_is_claimed_once(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=PARENT)
    assert claim.outcome == "run" and claim.row is None and claim.execution_id
    with pytest.raises(CallBusyError, match="is running in process") as busy:
        ledger.claim(IDENT, ref=REF, owner=ME)
    assert busy.value.retryable and busy.value.details["pid"] == PARENT.pid
    row = row_of(ledger, IDENT.call_id)
    assert (row.state, row.execution_id, row.owner) == ("claimed", claim.execution_id, PARENT)
    assert (row.args_sha256, row.idempotency_key, row.ref) == (IDENT.args_sha256, None, REF)
    assert kinds(ledger, IDENT.call_id) == ["claimed"]  # the refused claim recorded nothing


def test_a_prepared_call_of_a_live_owner_is_busy_too(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=PARENT)
    ledger.record(
        Event(IDENT.call_id, claim.execution_id, EventKind.PREPARED, RowChange(state="prepared"))
    )
    with pytest.raises(CallBusyError):
        ledger.claim(IDENT, ref=REF, owner=ME)
    assert row_of(ledger, IDENT.call_id).execution_id == claim.execution_id


def test_own_claim_left_by_a_failed_apply_is_taken_over(ledger: Ledger) -> None:
    first = ledger.claim(IDENT, ref=REF, owner=ME)
    again = ledger.claim(IDENT, ref=REF, owner=ME)
    assert again.outcome == "takeover" and again.execution_id != first.execution_id
    assert again.row is not None and again.row.execution_id == first.execution_id
    assert row_of(ledger, IDENT.call_id).execution_id == again.execution_id


def test_claim_of_a_dead_owner_is_taken_over(ledger: Ledger) -> None:
    first = ledger.claim(IDENT, ref=REF, owner=DEAD)
    again = ledger.claim(IDENT, ref=REF, owner=ME)
    assert again.outcome == "takeover"
    assert again.row is not None and again.row.owner == DEAD
    row = row_of(ledger, IDENT.call_id)
    assert (row.state, row.execution_id, row.owner) == ("claimed", again.execution_id, ME)
    last = ledger.events(IDENT.call_id)[-1]
    assert (last.kind, last.execution_id) == ("claimed", again.execution_id)
    assert last.data["previous_state"] == "claimed"
    assert last.data["previous_execution_id"] == first.execution_id


def test_terminal_calls_replay_and_retryable_ones_run_again(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=ME)
    ledger.record(
        Event(
            IDENT.call_id,
            claim.execution_id,
            EventKind.REJECTED,
            RowChange(state="rejected", retryable=True),
        )
    )
    rerun = ledger.claim(IDENT, ref=REF, owner=ME)
    assert rerun.outcome == "run" and rerun.execution_id != claim.execution_id
    assert rerun.row is not None and rerun.row.state == "rejected"
    assert row_of(ledger, IDENT.call_id).retryable is False  # the new run starts afresh
    ledger.record(
        Event(
            IDENT.call_id,
            rerun.execution_id,
            EventKind.COMMITTED,
            RowChange(state="committed", commit_id="c" * 40),
        )
    )
    before = kinds(ledger)
    replay = ledger.claim(IDENT, ref=REF, owner=PARENT)
    assert replay.outcome == "replay" and replay.execution_id == rerun.execution_id
    assert replay.row is not None and replay.row.commit_id == "c" * 40
    assert kinds(ledger) == before  # a replay records nothing


def test_a_final_rejection_replays(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=ME)
    ledger.record(
        Event(
            IDENT.call_id,
            claim.execution_id,
            EventKind.REJECTED,
            RowChange(state="rejected", exit_code=1, retryable=False),
        )
    )
    replay = ledger.claim(IDENT, ref=REF, owner=ME)
    assert replay.outcome == "replay" and replay.execution_id == claim.execution_id
    assert replay.row is not None and replay.row.exit_code == 1


def test_a_final_rejection_is_reopened_once_in_one_reevaluated_event(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=ME)
    ledger.record(
        Event(
            IDENT.call_id,
            claim.execution_id,
            EventKind.REJECTED,
            RowChange(state="rejected", exit_code=1, retryable=False, base_commit="b" * 40),
        )
    )
    assert ledger.reopen(IDENT.call_id, owner=ME, rejected="not-that-one") is None
    reopened = ledger.reopen(
        IDENT.call_id, owner=ME, rejected=claim.execution_id, data={"tip": "c" * 40}
    )
    assert reopened is not None and reopened.outcome == "run"
    assert reopened.execution_id != claim.execution_id
    row = row_of(ledger, IDENT.call_id)
    assert row.state == "claimed" and row.execution_id == reopened.execution_id
    assert row.owner == ME and row.lease is not None
    # The second reopener of the same rejection loses: the row is no longer that rejection.
    assert ledger.reopen(IDENT.call_id, owner=PARENT, rejected=claim.execution_id) is None
    with pytest.raises(CallBusyError):
        ledger.claim(IDENT, ref=REF, owner=PARENT)
    [event] = [e for e in ledger.events(IDENT.call_id) if e.kind == "reevaluated"]
    assert event.data["previous_state"] == "rejected" and event.data["tip"] == "c" * 40
    assert event.data["previous_execution_id"] == claim.execution_id
    assert kinds(ledger, IDENT.call_id) == ["claimed", "rejected", "reevaluated"]
    folded = fold_events(ledger.events())[IDENT.call_id]
    assert folded["state"] == "claimed" and folded["execution_id"] == reopened.execution_id
    assert ledger.reopen(ident(9).call_id, owner=ME, rejected="x") is None  # no such call


def test_an_unknown_call_is_left_to_a_person(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=DEAD)
    ledger.record(
        Event(IDENT.call_id, claim.execution_id, EventKind.UNKNOWN, RowChange(state="unknown"))
    )
    again = ledger.claim(IDENT, ref=REF, owner=ME)
    assert again.outcome == "unknown" and again.execution_id == claim.execution_id
    assert kinds(ledger, IDENT.call_id) == ["claimed", "unknown"]


def test_key_reuse_with_other_args_is_refused(ledger: Ledger) -> None:
    one, two = ident(1, key="k"), ident(2, key="k")
    assert one.call_id == two.call_id  # the key, not the args, names the call
    ledger.claim(one, ref=REF, owner=DEAD)
    with pytest.raises(KeyReusedError, match="'k' was already used") as reused:
        ledger.claim(two, ref=REF, owner=ME)
    assert reused.value.details["call_id"] == one.call_id
    row = row_of(ledger, one.call_id)
    assert (row.args_sha256, row.owner) == (one.args_sha256, DEAD)
    assert kinds(ledger) == ["claimed"]


def test_the_same_call_on_another_ref_is_refused_even_when_terminal(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=ME)
    ledger.record(
        Event(IDENT.call_id, claim.execution_id, EventKind.COMMITTED, RowChange(state="committed"))
    )
    with pytest.raises(KeyReusedError):
        ledger.claim(IDENT, ref="refs/heads/other", owner=ME)


def test_a_recorded_identity_of_the_wrong_shape_is_a_ledger_error(ledger: Ledger) -> None:
    """Rows read back are untrusted, whatever the backend: a garbage identity is a one-line
    LedgerError, never a pydantic ValidationError escaping as an internal error."""
    ledger.record(Event("b" * 64, "x1", EventKind.ADOPTED, data={"identity": {"call_id": 7}}))
    with pytest.raises(LedgerError):
        recorded_identity(ledger, "b" * 64)


def test_the_claim_records_identity_args_and_source(ledger: Ledger) -> None:
    class Args(BaseModel):
        patch: str
        ref: str

    args = Args(patch="*** Begin Patch", ref=REF)
    source = {"format": "codex", "text": "*** Begin Patch\n"}
    claim = ledger.claim(IDENT, ref=REF, owner=ME, args=args, source=source)
    assert recorded_identity(ledger, IDENT.call_id) == IDENT
    assert claimed_data(ledger, IDENT.call_id, "args") == args.model_dump(mode="json")
    assert claimed_data(ledger, IDENT.call_id, "source") == source
    event = ledger.events(IDENT.call_id)[0]
    assert (event.kind, event.execution_id) == ("claimed", claim.execution_id)
    row = row_of(ledger, IDENT.call_id)
    assert row.lease is not None and row.lease.seconds == 30.0  # the default lease
    assert event.data["set"] == {
        "state": "claimed",
        "execution_id": claim.execution_id,
        "owner_pid": ME.pid,
        "owner_host": ME.host,
        "owner_start": ME.start,
        "owner_pidns": ME.pidns,
        "owner_boot": ME.boot,
        "lease_expires_at": row.lease.expires_at,
        "lease_seconds": 30.0,
    }


# --- record -------------------------------------------------------------------------------------


def test_event_and_state_change_are_one_transaction(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=ME)
    before = row_of(ledger, IDENT.call_id)
    good = Event(IDENT.call_id, None, EventKind.PREPARED, RowChange(state="prepared"))
    unserialisable = Event(IDENT.call_id, None, EventKind.STAGED, data={"tree": object()})
    with pytest.raises(TypeError):
        ledger.record(good, unserialisable)
    assert row_of(ledger, IDENT.call_id) == before  # the first event's change was rolled back
    assert kinds(ledger) == ["claimed"]


def test_a_batch_is_recorded_whole_and_in_order(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=ME)
    other = ident(2)
    ledger.claim(other, ref=REF, owner=ME)
    ledger.record(
        Event(IDENT.call_id, claim.execution_id, EventKind.PREPARED, RowChange(state="prepared")),
        Event(other.call_id, None, EventKind.DENIED, RowChange(state="rejected"), {"by": "x"}),
        Event(IDENT.call_id, claim.execution_id, EventKind.STAGED, data={"tree": "t" * 40}),
    )
    logged = ledger.events()
    assert [e.kind for e in logged] == ["claimed", "claimed", "prepared", "denied", "staged"]
    assert [e.seq for e in logged] == sorted(e.seq for e in logged)
    assert len({e.seq for e in logged}) == 5
    assert logged[3].data == {"set": {"state": "rejected"}, "by": "x"}
    assert logged[4].data == {"set": {}, "tree": "t" * 40}
    assert row_of(ledger, IDENT.call_id).state == "prepared"
    assert row_of(ledger, other.call_id).state == "rejected"


def test_unset_columns_are_untouched_and_none_sets_null(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=ME)
    cid, eid = IDENT.call_id, claim.execution_id
    ledger.record(
        Event(cid, eid, EventKind.PREPARED, RowChange(state="prepared", base_commit="b" * 40))
    )
    ledger.record(Event(cid, eid, EventKind.COMMIT_OBJECT, RowChange(commit_id="c" * 40)))
    ledger.record(Event(cid, eid, EventKind.CHECKED, RowChange(exit_code=0, synced=True)))
    row = row_of(ledger, cid)
    assert (row.state, row.base_commit, row.commit_id, row.exit_code, row.synced) == (
        "prepared",
        "b" * 40,
        "c" * 40,
        0,
        True,
    )
    assert (row.execution_id, row.owner) == (eid, ME)
    ledger.record(Event(cid, eid, EventKind.REPAIRED, RowChange(base_commit=None, exit_code=None)))
    row = row_of(ledger, cid)
    assert (row.base_commit, row.exit_code) == (None, None)
    assert (row.state, row.commit_id, row.synced, row.execution_id) == (
        "prepared",
        "c" * 40,
        True,
        eid,
    )
    unchanged = row
    ledger.record(Event(cid, eid, EventKind.APPROVED, data={"protected": ["src/"]}))
    after = row_of(ledger, cid)
    assert dataclasses.replace(after, updated_at="") == dataclasses.replace(
        unchanged, updated_at=""
    )
    sets = [e.data["set"] for e in ledger.events(cid)][1:]
    assert sets == [
        {"state": "prepared", "base_commit": "b" * 40},
        {"commit_id": "c" * 40},
        {"exit_code": 0, "synced": 1},  # booleans as 0/1, as the columns hold them
        {"base_commit": None, "exit_code": None},
        {},
    ]


def test_calls_rebuild_from_events(ledger: Ledger) -> None:
    committed = ledger.claim(IDENT, ref=REF, owner=DEAD)
    taken = ledger.claim(IDENT, ref=REF, owner=ME)
    assert taken.outcome == "takeover"
    cid, eid = IDENT.call_id, taken.execution_id
    ledger.record(
        Event(cid, eid, EventKind.PREPARED, RowChange(state="prepared", base_commit="b" * 40))
    )
    ledger.record(
        Event(cid, eid, EventKind.CHECKED, data={"checks": []}),
        Event(
            cid,
            eid,
            EventKind.COMMITTED,
            RowChange(state="committed", commit_id="c" * 40, exit_code=0, receipt_sha256="r" * 64),
        ),
    )
    ledger.record(Event(cid, eid, EventKind.SYNCED, RowChange(synced=True)))
    assert committed.execution_id != eid

    retried = ident(2, key="retry")
    first = ledger.claim(retried, ref="refs/heads/dev", owner=ME)
    ledger.record(
        Event(
            retried.call_id,
            first.execution_id,
            EventKind.REJECTED,
            RowChange(state="rejected", retryable=True, exit_code=4),
        )
    )
    ledger.claim(retried, ref="refs/heads/dev", owner=ME)  # run again: retryable reset

    adopted = ident(3)
    ledger.ensure_row(
        adopted,
        REF,
        reason="found in Git",
        change=RowChange(state="committed", execution_id="e" * 32, commit_id="d" * 40),
    )
    recovering = ident(4)
    ledger.claim(recovering, ref=REF, owner=DEAD)
    assert ledger.take_over(recovering.call_id, ME) is not None
    ledger.claim(ident(5), ref=REF, owner=PARENT)

    folded = fold_events(ledger.events())
    rows = ledger.calls()
    assert sorted(folded) == sorted(r.call_id for r in rows) and len(rows) == 5
    for row in rows:
        assert _columns_of(folded[row.call_id]) == _columns_of_row(row), row.call_id[:12]
    assert kinds(ledger, cid) == [
        "claimed",
        "claimed",
        "prepared",
        "checked",
        "committed",
        "synced",
    ]


_DEFAULTS: dict[str, Any] = {
    "execution_id": None,
    "base_commit": None,
    "commit_id": None,
    "exit_code": None,
    "retryable": 0,
    "receipt_sha256": None,
    "synced": 0,
    "owner_pid": None,
    "owner_host": None,
    "owner_start": None,
}


def _columns_of(folded: dict[str, Any]) -> dict[str, Any]:
    keys = ("state", "args_sha256", "idempotency_key", "ref", *_DEFAULTS)
    return {k: folded.get(k, _DEFAULTS.get(k)) for k in keys}


def _columns_of_row(row: CallRow) -> dict[str, Any]:
    return {
        "state": row.state,
        "args_sha256": row.args_sha256,
        "idempotency_key": row.idempotency_key,
        "ref": row.ref,
        "execution_id": row.execution_id,
        "base_commit": row.base_commit,
        "commit_id": row.commit_id,
        "exit_code": row.exit_code,
        "retryable": int(row.retryable),
        "receipt_sha256": row.receipt_sha256,
        "synced": int(row.synced),
        "owner_pid": row.owner.pid if row.owner else None,
        "owner_host": row.owner.host if row.owner else None,
        "owner_start": row.owner.start if row.owner else None,
    }


# --- take_over ----------------------------------------------------------------------------------


def test_take_over_a_dead_owners_call(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=DEAD)
    ledger.record(
        Event(IDENT.call_id, claim.execution_id, EventKind.PREPARED, RowChange(state="prepared"))
    )
    new = ledger.take_over(IDENT.call_id, ME)
    assert new is not None and new != claim.execution_id
    row = row_of(ledger, IDENT.call_id)
    assert (row.state, row.execution_id, row.owner) == ("prepared", new, ME)  # state kept
    last = ledger.events(IDENT.call_id)[-1]
    assert (last.kind, last.execution_id) == ("recovering", new)
    assert last.data["previous_execution_id"] == claim.execution_id


def test_take_over_own_stale_claim(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=ME)
    new = ledger.take_over(IDENT.call_id, ME)
    assert new is not None and new != claim.execution_id
    assert row_of(ledger, IDENT.call_id).execution_id == new


def test_take_over_refuses_terminal_live_held_and_unknown_calls(ledger: Ledger) -> None:
    held = ledger.claim(ident(1), ref=REF, owner=PARENT)
    committed = ledger.claim(ident(2), ref=REF, owner=DEAD)
    rejected = ledger.claim(ident(3), ref=REF, owner=DEAD)
    unknown = ledger.claim(ident(4), ref=REF, owner=DEAD)
    ledger.record(
        Event(
            ident(2).call_id,
            committed.execution_id,
            EventKind.COMMITTED,
            RowChange(state="committed"),
        ),
        Event(
            ident(3).call_id,
            rejected.execution_id,
            EventKind.REJECTED,
            RowChange(state="rejected", retryable=True),
        ),
        Event(
            ident(4).call_id, unknown.execution_id, EventKind.UNKNOWN, RowChange(state="unknown")
        ),
    )
    ledger.ensure_row(ident(5), REF, reason="found in Git")  # state "new": not in flight
    before = ledger.events()
    for n in (1, 2, 3, 4, 5):
        assert ledger.take_over(ident(n).call_id, ME) is None, n
    assert ledger.take_over("f" * 64, ME) is None  # no such call
    assert ledger.events() == before
    assert row_of(ledger, ident(1).call_id).execution_id == held.execution_id


def test_take_over_many_takes_what_take_over_would_in_one_step(ledger: Ledger) -> None:
    held = ledger.claim(ident(1), ref=REF, owner=PARENT)
    dead = [ledger.claim(ident(n), ref=REF, owner=DEAD) for n in (2, 3)]
    done = ledger.claim(ident(4), ref=REF, owner=DEAD)
    ledger.record(
        Event(
            ident(4).call_id, done.execution_id, EventKind.COMMITTED, RowChange(state="committed")
        )
    )
    wanted = [ident(n).call_id for n in (1, 2, 3, 4)] + ["f" * 64]
    taken = ledger.take_over_many(wanted, ME, lease_seconds=7)
    assert set(taken) == {ident(2).call_id, ident(3).call_id}
    for n, claim in zip((2, 3), dead, strict=True):
        row = row_of(ledger, ident(n).call_id)
        assert (row.execution_id, row.owner) == (taken[ident(n).call_id], ME)
        assert row.lease is not None and row.lease.seconds == 7
        last = ledger.events(ident(n).call_id)[-1]
        assert (last.kind, last.data["previous_execution_id"]) == ("recovering", claim.execution_id)
    assert row_of(ledger, ident(1).call_id).execution_id == held.execution_id
    assert ledger.take_over_many([], ME) == {}


def test_events_of_reads_the_events_of_several_calls_at_once(ledger: Ledger) -> None:
    for n in (1, 2, 3):
        ledger.claim(ident(n), ref=REF, owner=DEAD)
    ledger.take_over(ident(2).call_id, ME)
    wanted = [ident(2).call_id, ident(3).call_id, "f" * 64]
    found = ledger.events_of(wanted)
    assert found == {c: ledger.events(c) for c in wanted[:2]}
    assert [e.kind for e in found[ident(2).call_id]] == ["claimed", "recovering"]


def test_get_many_reads_the_rows_of_several_calls_at_once(ledger: Ledger) -> None:
    for n in (1, 2, 3):
        ledger.claim(ident(n), ref=REF, owner=DEAD)
    ledger.take_over(ident(2).call_id, ME)
    wanted = [ident(2).call_id, ident(3).call_id, "f" * 64, ident(2).call_id]
    found = ledger.get_many(iter(wanted))  # any iterable, a call named twice, one unknown
    assert found == {c: ledger.get(c) for c in wanted[:2]}
    assert ledger.get_many([]) == {}


def test_take_over_refuses_a_claim_of_another_host_with_the_same_pid(ledger: Ledger) -> None:
    # Another host's process cannot be checked from here: its lease (30 s) holds.
    assert not ELSEWHERE.provably_alive() and not ELSEWHERE.provably_dead()
    ledger.claim(IDENT, ref=REF, owner=ELSEWHERE)
    with pytest.raises(CallBusyError, match=r"build-host-2\.example\.invalid"):
        ledger.claim(IDENT, ref=REF, owner=ME)
    assert ledger.take_over(IDENT.call_id, ME) is None


@pytest.mark.parametrize("where", ["another PID namespace", "another boot", "a version before"])
def test_a_dead_pid_of_another_namespace_holds_until_its_lease_ends(
    ledger: Ledger, where: str
) -> None:
    # Two containers of one pod: one hostname, and a pid that is dead (or another process) here
    # but may be the owner, alive, there. Only its lease can say it stopped.
    pidns, boot = {
        "another PID namespace": ("pid:[1]", DEAD.boot),
        "another boot": (DEAD.pidns, "another-boot"),
        "a version before": ("", ""),  # a row written before owners recorded them
    }[where]
    there = dataclasses.replace(DEAD, pidns=pidns, boot=boot)
    ledger.claim(IDENT, ref=REF, owner=there, lease_seconds=0.3)
    assert row_of(ledger, IDENT.call_id).owner == there  # recorded and read back as written
    with pytest.raises(CallBusyError, match="its lease runs until"):
        ledger.claim(IDENT, ref=REF, owner=ME)
    assert ledger.take_over(IDENT.call_id, ME) is None
    time.sleep(0.4)
    assert ledger.take_over(IDENT.call_id, ME) is not None


# --- ensure_row ---------------------------------------------------------------------------------


def test_ensure_row_creates_once(ledger: Ledger) -> None:
    keyed = ident(7, key="adopt-me")
    assert ledger.ensure_row(keyed, REF, reason="receipt without a row") is True
    row = row_of(ledger, keyed.call_id)
    assert (row.state, row.ref, row.args_sha256, row.idempotency_key) == (
        "new",
        REF,
        keyed.args_sha256,
        "adopt-me",
    )
    assert (row.execution_id, row.owner, row.retryable, row.synced) == (None, None, False, False)
    [event] = ledger.events(keyed.call_id)
    assert (event.kind, event.execution_id) == ("adopted", None)
    assert event.data["reason"] == "receipt without a row"
    assert event.data["set"] == {"state": "new"}
    assert recorded_identity(ledger, keyed.call_id) == keyed
    assert ledger.ensure_row(keyed, REF, reason="again") is False
    assert ledger.ensure_row(keyed, REF, reason="again", change=RowChange(state="x")) is False
    assert kinds(ledger) == ["adopted"] and row_of(ledger, keyed.call_id) == row


def test_ensure_row_applies_its_change(ledger: Ledger) -> None:
    change = RowChange(state="committed", execution_id="e" * 32, commit_id="c" * 40)
    assert ledger.ensure_row(IDENT, REF, reason="found in Git", change=change)
    row = row_of(ledger, IDENT.call_id)
    assert (row.state, row.execution_id, row.commit_id) == ("committed", "e" * 32, "c" * 40)
    assert ledger.events(IDENT.call_id)[0].execution_id == "e" * 32
    assert ledger.claim(IDENT, ref=REF, owner=ME).outcome == "replay"


def test_ensure_row_leaves_a_claimed_call_alone(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=PARENT)
    row = row_of(ledger, IDENT.call_id)
    assert ledger.ensure_row(IDENT, REF, reason="x", change=RowChange(state="committed")) is False
    assert row_of(ledger, IDENT.call_id) == row and kinds(ledger) == ["claimed"]


# --- calls and events ---------------------------------------------------------------------------


def test_calls_filter_by_state_oldest_first(ledger: Ledger) -> None:
    # Created newest call_id first, so call_id order is not age order.
    idents = sorted((ident(n) for n in range(1, 5)), key=lambda i: i.call_id, reverse=True)
    states = ["committed", "claimed", "rejected", "prepared"]
    for one, state in zip(idents, states, strict=True):
        claim = ledger.claim(one, ref=REF, owner=ME)
        if state != "claimed":
            kind = EventKind(state)  # committed, rejected, prepared: each its own event kind
            ledger.record(Event(one.call_id, claim.execution_id, kind, RowChange(state=state)))
        time.sleep(0.003)  # distinct creation times: the columns keep milliseconds
    # Touch the oldest last: age is creation, not the latest change.
    ledger.record(Event(idents[0].call_id, None, EventKind.SYNCED, RowChange(synced=True)))
    assert [r.call_id for r in ledger.calls()] == [i.call_id for i in idents]
    assert [r.call_id for r in ledger.calls(states=("committed", "rejected"))] == [
        idents[0].call_id,
        idents[2].call_id,
    ]
    assert [r.state for r in ledger.calls(states=IN_FLIGHT)] == ["claimed", "prepared"]
    assert ledger.calls(states=("unknown",)) == []


def test_calls_created_in_the_same_millisecond_are_still_oldest_first(
    ledger: Ledger, backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    import applyonce.state.sqlite.ledger
    import tests.state.fakes

    for module in (applyonce.state.sqlite.ledger, tests.state.fakes):
        monkeypatch.setattr(module, "now", lambda: "2025-01-01T00:00:00.000Z")
    if backend.name.startswith("postgres"):
        import applyonce.state.postgres.ledger as pg

        # Its stamps come from the server's clock, through this one function.
        monkeypatch.setattr(pg, "_at", lambda now: "2025-01-01T00:00:00.000Z")
    idents = sorted((ident(n) for n in range(1, 4)), key=lambda i: i.call_id, reverse=True)
    for one in idents:
        ledger.claim(one, ref=REF, owner=ME)
    assert [r.call_id for r in ledger.calls()] == [i.call_id for i in idents]


def test_events_in_record_order_with_kinds_as_strings(ledger: Ledger) -> None:
    one, two = ident(1), ident(2)
    first = ledger.claim(one, ref=REF, owner=ME)
    ledger.claim(two, ref=REF, owner=ME)
    ledger.record(Event(one.call_id, first.execution_id, EventKind.COMMIT_OBJECT, data={"n": 1}))
    ledger.record(Event(two.call_id, None, EventKind.RESOLVED, data={"n": 2}))
    ledger.record(Event(one.call_id, first.execution_id, EventKind.COMMITTED, data={"n": 3}))
    everything = ledger.events()
    assert [(e.call_id, e.kind) for e in everything] == [
        (one.call_id, "claimed"),
        (two.call_id, "claimed"),
        (one.call_id, "commit-object"),
        (two.call_id, "resolved"),
        (one.call_id, "committed"),
    ]
    assert all(type(e.kind) is str and isinstance(e.at, str) and e.at for e in everything)
    seqs = [e.seq for e in everything]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    mine = ledger.events(one.call_id)
    assert [e.kind for e in mine] == ["claimed", "commit-object", "committed"]
    assert [e.data.get("n") for e in mine] == [None, 1, 3]
    assert [e.execution_id for e in mine] == [first.execution_id] * 3
    assert ledger.events("f" * 64) == []


def test_unsynced_lists_committed_calls_not_yet_synced(ledger: Ledger) -> None:
    main, dev, synced = ident(1), ident(2), ident(3)
    for one, ref in ((main, REF), (dev, "refs/heads/dev"), (synced, REF)):
        claim = ledger.claim(one, ref=ref, owner=ME)
        ledger.record(
            Event(
                one.call_id, claim.execution_id, EventKind.COMMITTED, RowChange(state="committed")
            )
        )
    ledger.record(Event(synced.call_id, None, EventKind.SYNCED, RowChange(synced=True)))
    assert {r.call_id for r in ledger.unsynced()} == {main.call_id, dev.call_id}
    assert [r.call_id for r in ledger.unsynced(REF)] == [main.call_id]


# --- concurrency --------------------------------------------------------------------------------


@pytest.fixture
def live_owners() -> Iterator[list[Owner]]:
    """Eight live processes other than this one, each an owner of its own."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"]) for _ in range(8)
    ]
    try:
        owners = [Owner.local(p.pid, _process_start(p.pid) or "") for p in procs]
        assert all(o.provably_alive() for o in owners)
        yield owners
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_threads_racing_on_one_call_give_one_run(
    backend: Backend, live_owners: list[Owner]
) -> None:
    barrier = threading.Barrier(len(live_owners))
    outcomes: list[str] = []
    lock = threading.Lock()

    def race(owner: Owner) -> None:
        with backend.session() as mine:
            barrier.wait()
            try:
                outcome: str = mine.claim(IDENT, ref=REF, owner=owner).outcome
            except CallBusyError:
                outcome = "busy"
            with lock:
                outcomes.append(outcome)

    threads = [threading.Thread(target=race, args=(o,)) for o in live_owners]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert sorted(outcomes) == ["busy"] * (len(live_owners) - 1) + ["run"]
    with backend.session() as ledger:
        assert kinds(ledger) == ["claimed"]
        assert row_of(ledger, IDENT.call_id).owner in live_owners


# --- Owner (what claim and take_over ask of a claim's owner; the same for every ledger) ----------


def test_owner_liveness(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ME.provably_alive() and PARENT.provably_alive()
    assert not ME.provably_dead() and DEAD.provably_dead()
    assert _process_start(os.getpid()) == ME.start and ME.start.isdigit()
    assert not DEAD.provably_alive() and _process_start(DEAD.pid) is None
    # A reused pid is not the same owner: this pid, but a start time other than this process's.
    assert Owner.local(os.getpid(), "1").provably_dead()
    assert Owner.local(os.getpid(), "").provably_alive()  # no start recorded: the pid
    # Another host's process cannot be checked from here: neither alive nor dead; its lease tells.
    gone_elsewhere = Owner(DEAD.pid, "build-host-2.example.invalid", "1")
    assert not gone_elsewhere.provably_alive() and not gone_elsewhere.provably_dead()
    # Nor can a process of this host in another PID namespace or boot (its pid means another
    # process here, or none), nor one recorded by a version before namespaces were: alive or
    # dead, the lease decides.
    for pidns, boot in [("pid:[1]", ME.boot), (ME.pidns, "another-boot"), ("", "")]:
        for owner in (
            dataclasses.replace(DEAD, pidns=pidns, boot=boot),
            dataclasses.replace(ME, pidns=pidns, boot=boot),
        ):
            assert not owner.provably_alive() and not owner.provably_dead()
    # The host is APPLYONCE_HOST_ID when set: this very process, seen from "another host".
    monkeypatch.setenv("APPLYONCE_HOST_ID", "renamed-container")
    assert Owner.me().host == "renamed-container" and socket.gethostname() != "renamed-container"
    assert not ME.provably_alive() and not ME.provably_dead()


# --- leases ---------------------------------------------------------------------------------------


def _set_lease(ledger: Ledger, lease: Lease | None) -> None:
    """Make the claim's lease ``lease`` (a row as a clock that stepped, a forger, or a version
    before leases would leave it)."""
    ledger.record(Event(IDENT.call_id, None, EventKind.REPAIRED, RowChange(lease=lease)))


def test_a_claim_of_another_host_is_taken_over_once_its_lease_ended(ledger: Ledger) -> None:
    first = ledger.claim(IDENT, ref=REF, owner=ELSEWHERE, lease_seconds=0.3)
    with pytest.raises(CallBusyError, match="its lease runs until") as busy:
        ledger.claim(IDENT, ref=REF, owner=ME)
    assert busy.value.details["host"] == ELSEWHERE.host
    assert ledger.take_over(IDENT.call_id, ME) is None
    time.sleep(0.4)  # no renewal: the lease ends, whatever host made the claim
    again = ledger.claim(IDENT, ref=REF, owner=ME, lease_seconds=5)
    assert again.outcome == "takeover" and again.row is not None and again.row.owner == ELSEWHERE
    row = row_of(ledger, IDENT.call_id)
    assert (row.owner, row.execution_id) == (ME, again.execution_id)
    assert row.lease is not None and row.lease.seconds == 5
    assert ledger.events(IDENT.call_id)[-1].data["previous_execution_id"] == first.execution_id


def test_take_over_of_an_ended_lease(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=ELSEWHERE, lease_seconds=0.05)
    time.sleep(0.1)
    new = ledger.take_over(IDENT.call_id, ME, lease_seconds=7)
    row = row_of(ledger, IDENT.call_id)
    assert new is not None and (row.owner, row.execution_id) == (ME, new)
    assert row.lease is not None and row.lease.seconds == 7


def test_a_renewed_lease_holds_and_is_not_an_event(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=ELSEWHERE, lease_seconds=0.3)
    before, events = row_of(ledger, IDENT.call_id), ledger.events()
    assert ledger.renew(IDENT.call_id, ELSEWHERE, lease_seconds=10) is True
    after = row_of(ledger, IDENT.call_id)
    assert after.lease is not None and before.lease is not None
    assert after.lease.seconds == 10 and after.lease.expires_at > before.lease.expires_at
    assert after.updated_at == before.updated_at and ledger.events() == events
    time.sleep(0.4)  # past the first lease: the renewal holds the call
    with pytest.raises(CallBusyError):
        ledger.claim(IDENT, ref=REF, owner=ME)


def test_renew_works_from_another_thread(ledger: Ledger) -> None:
    # The heartbeat renews from its own thread while the call's thread uses the same ledger.
    ledger.claim(IDENT, ref=REF, owner=ME, lease_seconds=0.5)
    results: list[bool | Exception] = []

    def renew() -> None:
        try:
            results.append(ledger.renew(IDENT.call_id, ME, lease_seconds=9))
        except Exception as exc:
            results.append(exc)

    thread = threading.Thread(target=renew)
    thread.start()
    thread.join(timeout=30)
    assert results == [True]
    lease = row_of(ledger, IDENT.call_id).lease
    assert lease is not None and lease.seconds == 9


def test_renew_refuses_a_claim_that_is_not_its_own_any_more(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=DEAD)
    assert ledger.claim(IDENT, ref=REF, owner=ME).outcome == "takeover"
    row = row_of(ledger, IDENT.call_id)
    assert ledger.renew(IDENT.call_id, DEAD) is False  # taken over: the old owner lost it
    assert row_of(ledger, IDENT.call_id) == row
    assert ledger.renew("f" * 64, ME) is False
    claim = ledger.claim(ident(2), ref=REF, owner=ME)
    ledger.record(
        Event(
            ident(2).call_id, claim.execution_id, EventKind.COMMITTED, RowChange(state="committed")
        )
    )
    assert ledger.renew(ident(2).call_id, ME) is False  # terminal: nothing to hold


def test_a_dead_owner_on_this_host_is_taken_over_before_its_lease_ends(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=DEAD, lease_seconds=3600)
    assert ledger.claim(IDENT, ref=REF, owner=ME).outcome == "takeover"


def test_a_lease_ending_far_ahead_of_the_clock_holds_and_says_what_to_do(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=ELSEWHERE)
    _set_lease(ledger, Lease(stamp(time.time() + 86400 * 365), 30))  # a year ahead of this clock
    events = ledger.events()
    started = time.monotonic()
    with pytest.raises(CallBusyError) as busy:
        ledger.claim(IDENT, ref=REF, owner=ME)
    assert time.monotonic() - started < 2  # refused at once, never waited on
    assert "more than a lease (30 s) ahead of this clock" in busy.value.message
    assert f"applyonce resolve {IDENT.call_id[:12]} --release" in busy.value.hint
    assert ledger.take_over(IDENT.call_id, ME) is None and ledger.events() == events
    # Released by hand, the call is taken over by the next claim.
    ledger.release(IDENT.call_id, by=ME, note="the clock of build-host-2 is wrong")
    assert ledger.claim(IDENT, ref=REF, owner=ME).outcome == "takeover"


def test_a_claim_without_a_lease_ends_a_lease_after_its_last_update(ledger: Ledger) -> None:
    # Written by a version before leases: the claimant's lease, counted from the row's update.
    ledger.claim(IDENT, ref=REF, owner=ELSEWHERE)
    _set_lease(ledger, None)
    assert row_of(ledger, IDENT.call_id).lease is None
    with pytest.raises(CallBusyError):
        ledger.claim(IDENT, ref=REF, owner=ME, lease_seconds=0.3)
    time.sleep(0.4)
    assert ledger.claim(IDENT, ref=REF, owner=ME, lease_seconds=0.3).outcome == "takeover"


def test_an_unreadable_lease_counts_as_ended(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=ELSEWHERE)
    _set_lease(ledger, Lease("not a time", 30))
    assert ledger.claim(IDENT, ref=REF, owner=ME).outcome == "takeover"


def test_release_frees_a_stuck_claim_in_one_event(ledger: Ledger) -> None:
    claim = ledger.claim(IDENT, ref=REF, owner=ELSEWHERE)
    ledger.record(
        Event(IDENT.call_id, claim.execution_id, EventKind.PREPARED, RowChange(state="prepared"))
    )
    before = row_of(ledger, IDENT.call_id)
    was = ledger.release(IDENT.call_id, by=ME, note="  container\nrenamed ")
    assert was == before
    row = row_of(ledger, IDENT.call_id)
    assert (row.state, row.execution_id, row.owner, row.lease) == (
        "prepared",
        claim.execution_id,
        None,
        None,
    )
    last = ledger.events(IDENT.call_id)[-1]
    assert (last.kind, last.execution_id) == ("released", claim.execution_id)
    assert last.data["note"] == "container renamed"  # one line
    assert last.data["previous_owner"] == ELSEWHERE.as_dict()
    assert last.data["by"] == ME.as_dict()
    assert before.lease is not None and last.data["lease_expires_at"] == before.lease.expires_at
    with pytest.raises(NothingToReleaseError, match="free already"):
        ledger.release(IDENT.call_id, by=ME)
    again = ledger.claim(IDENT, ref=REF, owner=ME)
    assert again.outcome == "takeover" and again.row is not None and again.row.owner is None
    folded = fold_events(ledger.events())[IDENT.call_id]
    assert folded["owner_pid"] == ME.pid  # the release and the claim after it rebuild too


def test_release_refuses_a_live_owner_here_and_calls_not_in_flight(ledger: Ledger) -> None:
    ledger.claim(IDENT, ref=REF, owner=PARENT)
    done = ledger.claim(ident(2), ref=REF, owner=ME)
    ledger.record(
        Event(
            ident(2).call_id, done.execution_id, EventKind.COMMITTED, RowChange(state="committed")
        )
    )
    events = ledger.events()
    with pytest.raises(ClaimStillHeldError, match=f"process {PARENT.pid} on") as held:
        ledger.release(IDENT.call_id, by=ME)
    assert held.value.exit_code == 4
    with pytest.raises(NothingToReleaseError, match="is committed"):
        ledger.release(ident(2).call_id, by=ME)
    with pytest.raises(NothingToReleaseError, match="no call"):
        ledger.release("f" * 64, by=ME)
    assert ledger.events() == events and row_of(ledger, IDENT.call_id).owner == PARENT
