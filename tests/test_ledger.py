"""The SQLite ledger: claims, events and state in one transaction, migrations, rebuild."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from applyonce.core.identity import CallIdentity
from applyonce.state.ledger import (
    CallBusyError,
    Event,
    EventKind,
    KeyReusedError,
    LedgerError,
    Owner,
    RowChange,
    _process_start,
    fold_events,
)
from applyonce.state.sqlite.ledger import SqliteLedger as Ledger

IDENT = CallIdentity.compute("a" * 64)
DEAD = Owner(pid=2**22 + 7, host=Owner.me().host, start="1")
# A live process that is not this one: the test runner's parent.
PARENT = Owner(os.getppid(), Owner.me().host, _process_start(os.getppid()) or "")


def test_new_call_is_claimed_once(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    claim = ledger.claim(IDENT, ref="refs/heads/main", owner=PARENT)
    assert claim.outcome == "run"
    with pytest.raises(CallBusyError, match="is running in process"):
        ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me())
    row = ledger.get(IDENT.call_id)
    assert row is not None and row.state == "claimed" and row.execution_id == claim.execution_id


def test_own_claim_left_by_a_failed_apply_is_taken_over(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me())
    assert ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me()).outcome == "takeover"


def test_claim_of_a_dead_owner_is_taken_over(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.claim(IDENT, ref="refs/heads/main", owner=DEAD)
    again = ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me())
    assert again.outcome == "takeover"
    assert again.row is not None and again.row.owner == DEAD


def test_terminal_calls_replay_and_retryable_ones_run_again(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    claim = ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me())
    ledger.record(Event(IDENT.call_id, claim.execution_id, EventKind.REJECTED, RowChange(state="rejected", retryable=True)))
    rerun = ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me())
    assert rerun.outcome == "run" and rerun.execution_id != claim.execution_id
    ledger.record(Event(IDENT.call_id, rerun.execution_id, EventKind.COMMITTED, RowChange(state="committed", commit_id="c" * 40)))
    assert ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me()).outcome == "replay"


def test_key_reuse_with_other_args_is_refused(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    one = CallIdentity.compute("a" * 64, idempotency_key="k")
    two = CallIdentity.compute("b" * 64, idempotency_key="k")
    ledger.claim(one, ref="refs/heads/main", owner=DEAD)
    with pytest.raises(KeyReusedError):
        ledger.claim(two, ref="refs/heads/main", owner=Owner.me())


def test_calls_rebuild_from_events(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    claim = ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me())
    ledger.record(Event(IDENT.call_id, claim.execution_id, EventKind.PREPARED, RowChange(state="prepared", base_commit="b" * 40)))
    ledger.record(Event(IDENT.call_id, claim.execution_id, EventKind.COMMITTED, RowChange(state="committed", commit_id="c" * 40)))
    rebuilt = fold_events(ledger.events())[IDENT.call_id]
    row = ledger.get(IDENT.call_id)
    assert row is not None
    assert (rebuilt["state"], rebuilt["commit_id"], rebuilt["base_commit"]) == (
        row.state, row.commit_id, row.base_commit,
    )
    assert [e.kind for e in ledger.events(IDENT.call_id)] == ["claimed", "prepared", "committed"]


def test_event_and_state_change_are_one_transaction(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.claim(IDENT, ref="refs/heads/main", owner=Owner.me())
    good = Event(IDENT.call_id, None, EventKind.PREPARED, RowChange(state="prepared"))
    unserialisable = Event(IDENT.call_id, None, EventKind.STAGED, data={"tree": object()})
    with pytest.raises(TypeError):
        ledger.record(good, unserialisable)
    row = ledger.get(IDENT.call_id)
    assert row is not None and row.state == "claimed"  # the first event's change was rolled back
    assert [e.kind for e in ledger.events(IDENT.call_id)] == ["claimed"]


def test_wal_full_sync_and_named_migrations(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    assert ledger.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert ledger.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    names = [r[0] for r in ledger.db.execute("SELECT name FROM migrations")]
    assert names == [
        "0001_events_and_calls", "0002_trailer_index", "0003_history_index_moved_out",
    ]
    ledger.close()
    Ledger(tmp_path / "ledger.sqlite3").close()  # re-opening does not re-apply


def test_broken_ledger_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match="is unreadable"):
        Ledger(path)
