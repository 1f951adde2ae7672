"""What only the SQLite ledger has: WAL and ``synchronous=FULL``, named migrations, a clear error
for a broken file, an in-memory ledger that writes nothing, and claims raced by real processes.

The Ledger contract itself (claim, record, events, …) is tests/state/test_ledger_contract.py, which
runs against SqliteLedger too.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from applyonce.core.identity import CallIdentity
from applyonce.state.ledger import Event, EventKind, LedgerError, Owner, RowChange
from applyonce.state.sqlite.ledger import MIGRATIONS, SqliteLedger

IDENT = CallIdentity.compute("a" * 64)
REF = "refs/heads/main"
ROOT = Path(__file__).resolve().parents[2]

# One racer: open the ledger, say so, wait for the start, claim, say how it went, and stay alive
# (a live owner) until stdin closes, so no racer sees the winner's claim as a dead one.
RACER = """
import pathlib, sys, time
from applyonce.core.identity import CallIdentity
from applyonce.state.ledger import CallBusyError, Owner
from applyonce.state.sqlite.ledger import SqliteLedger

ledger = SqliteLedger(pathlib.Path(sys.argv[1]))
go = pathlib.Path(sys.argv[2])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
try:
    claim = ledger.claim(CallIdentity.compute("a" * 64), ref="refs/heads/main", owner=Owner.me())
    print(claim.outcome, claim.execution_id, flush=True)
except CallBusyError:
    print("busy -", flush=True)
sys.stdin.read()
"""


def _racer(path: Path, go: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", RACER, str(path), str(go)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _line(racer: subprocess.Popen[str]) -> str:
    assert racer.stdout is not None
    return racer.stdout.readline().strip()


def test_wal_full_sync_and_named_migrations(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.sqlite3")
    assert ledger.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert ledger.db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    names = [r[0] for r in ledger.db.execute("SELECT name FROM migrations")]
    assert names == [
        "0001_events_and_calls",
        "0002_trailer_index",
        "0003_claim_leases",
        "0004_owner_namespace",
        "0005_unsynced_calls",
        "0007_repository",
    ]
    ledger.close()
    again = SqliteLedger(tmp_path / "ledger.sqlite3")  # re-opening does not re-apply
    assert [r[0] for r in again.db.execute("SELECT name FROM migrations")] == names
    again.close()


def test_an_older_ledger_is_migrated_forward_keeping_its_calls(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for name, sql in MIGRATIONS[:1]:
        old.executescript(sql)
        old.execute("INSERT INTO migrations VALUES (?, '2025-01-01T00:00:00.000Z')", (name,))
    old.execute(
        "INSERT INTO calls (call_id, state, args_sha256, ref, created_at, updated_at)"
        " VALUES (?, 'committed', ?, ?, 'then', 'then')",
        (IDENT.call_id, IDENT.args_sha256, REF),
    )
    old.commit()
    old.close()
    ledger = SqliteLedger(path)
    tables = {r[0] for r in ledger.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    # 0002 ran; and its tables stay, unused, so the versions before this one can still open it.
    assert {"trailer_index", "scanned"} <= tables
    row = ledger.get(IDENT.call_id)
    assert row is not None and row.state == "committed"
    assert ledger.claim(IDENT, ref=REF, owner=Owner.me()).outcome == "replay"
    ledger.close()


def test_broken_ledger_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(LedgerError, match="is unreadable") as broken:
        SqliteLedger(path)
    assert str(path) in broken.value.message and "recover" in broken.value.hint


def test_empty_ledger_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "state" / "ledger.sqlite3"
    ledger = SqliteLedger.empty(path)
    assert ledger.path == path and ledger.calls() == [] and ledger.events() == []
    assert not path.parent.exists()
    ledger.close()


def test_a_recorded_call_is_there_for_the_next_opener(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite3"
    first = SqliteLedger(path)
    claim = first.claim(IDENT, ref=REF, owner=Owner.me())
    first.record(
        Event(IDENT.call_id, claim.execution_id, EventKind.COMMITTED, RowChange(state="committed"))
    )
    row, events = first.get(IDENT.call_id), first.events()
    first.close()
    second = SqliteLedger(path)
    assert second.get(IDENT.call_id) == row and second.events() == events
    second.close()


def test_processes_racing_on_one_call_give_one_run(tmp_path: Path) -> None:
    path, go = tmp_path / "state" / "ledger.sqlite3", tmp_path / "go"
    racers = [_racer(path, go) for _ in range(8)]  # the first opening of the file is raced too
    try:
        assert [_line(r) for r in racers] == ["ready"] * 8
        go.touch()
        results = [_line(r).split() for r in racers]
    finally:
        for r in racers:
            r.communicate(timeout=60)
    assert sorted(outcome for outcome, _ in results) == ["busy"] * 7 + ["run"]
    [winner] = [
        (racer, eid)
        for racer, (outcome, eid) in zip(racers, results, strict=True)
        if outcome == "run"
    ]
    ledger = SqliteLedger(path)
    row = ledger.get(IDENT.call_id)
    assert row is not None and row.owner is not None
    assert (row.owner.pid, row.execution_id) == (winner[0].pid, winner[1])
    assert [e.kind for e in ledger.events()] == ["claimed"]
    ledger.close()


def test_the_claim_of_a_killed_process_is_taken_over(tmp_path: Path) -> None:
    path, go = tmp_path / "ledger.sqlite3", tmp_path / "go"
    go.touch()
    racer = _racer(path, go)
    assert _line(racer) == "ready"
    outcome, execution_id = _line(racer).split()
    assert outcome == "run"
    racer.send_signal(signal.SIGKILL)
    racer.communicate(timeout=60)
    ledger = SqliteLedger(path)
    claim = ledger.claim(IDENT, ref=REF, owner=Owner.me())
    assert claim.outcome == "takeover" and claim.row is not None
    assert (claim.row.owner.pid if claim.row.owner else None, claim.row.execution_id) == (
        racer.pid,
        execution_id,
    )
    ledger.close()
