"""What only the PostgreSQL ledger has to show (the contract suite runs on it too): real processes
racing on one call, first openers migrating at once, leases by the database's clock, a database
that cannot be reached or is lost, a held row lock, rows read back untrusted, and the receipts
kept in it."""

from __future__ import annotations

import hashlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from applyonce.core.identity import CallIdentity
from applyonce.core.receipt import Receipt, ReceiptError
from applyonce.state.lease import Owner
from applyonce.state.ledger import (
    CallBusyError,
    Event,
    EventKind,
    LedgerBusyError,
    LedgerError,
    RowChange,
)
from applyonce.state.postgres import connection
from applyonce.state.postgres.ledger import PostgresLedger
from applyonce.state.postgres.schema import MIGRATIONS
from applyonce.state.receipts import ReceiptStore
from applyonce.state.storage import LedgerUnavailableError
from tests.pgserver import PostgresServer

REF = "refs/heads/main"
IDENT = CallIdentity.compute("a" * 64)
ME = Owner.me()
ELSEWHERE = Owner(ME.pid, "build-host-2.example.invalid", "12345")

_RACER = """
import sys
from applyonce.core.identity import CallIdentity
from applyonce.state.lease import Owner
from applyonce.state.ledger import CallBusyError
from applyonce.state.postgres.ledger import PostgresLedger

def ready():
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()

ready()  # then every racer opens the fresh database at once: the first openers migrate it
ledger = PostgresLedger(sys.argv[1])
ready()  # then every racer, connected, claims the one call at once
try:
    outcome = ledger.claim(CallIdentity.compute("a" * 64), ref="refs/heads/main", owner=Owner.me())
    print(outcome.outcome)
except CallBusyError:
    print("busy")
"""


def _go(racers: list[subprocess.Popen[str]]) -> None:
    """Wait until every racer is ready, then start them as close together as pipes allow."""
    for racer in racers:
        assert racer.stdout is not None and racer.stderr is not None
        if racer.stdout.readline() != "ready\n":
            racer.wait(timeout=30)
            pytest.fail(f"a racer failed: {racer.stderr.read()[-2000:]}")
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.write("go\n")
        racer.stdin.flush()


def test_processes_opening_a_fresh_database_and_racing_on_one_call(pg_url: str) -> None:
    """Real processes, twice at once: opening a database nobody migrated yet (all succeed, each
    migration is recorded once), then claiming one call (exactly one runs)."""
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, pg_url],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    _go(racers)
    _go(racers)
    results = [racer.communicate(timeout=60) for racer in racers]
    assert all(r.returncode == 0 for r in racers), [err for _, err in results]
    outcomes = sorted(out.strip() for out, _ in results)
    # Exactly one runs; the others find its live owner (busy) or, if it exited already, a dead
    # owner here (a takeover, which settles through Git: never a second run).
    assert outcomes.count("run") == 1, outcomes
    assert set(outcomes) <= {"run", "busy", "takeover"}
    with psycopg.connect(pg_url) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY name")]
        first = conn.execute(
            "SELECT count(*) FROM events WHERE data NOT LIKE '%%previous_state%%'"
        ).fetchone()
    assert names == sorted(name for name, _ in MIGRATIONS)  # each recorded once
    assert first == (1,)  # one first claim; any others are takeovers of it


def test_leases_follow_the_database_clock_not_the_clients(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client whose clock runs an hour ahead would take any claim over at once if it judged
    leases by its own clock; judged by the database's, the other host's lease holds, then ends."""
    ledger = PostgresLedger(pg_url)
    try:
        ledger.claim(IDENT, ref=REF, owner=ELSEWHERE, lease_seconds=1.0)
        skewed = time.time() + 3600
        monkeypatch.setattr(time, "time", lambda: skewed)
        with pytest.raises(CallBusyError, match="its lease runs until"):
            ledger.claim(IDENT, ref=REF, owner=ME)
        monkeypatch.undo()
        time.sleep(1.1)
        assert ledger.claim(IDENT, ref=REF, owner=ME).outcome == "takeover"
    finally:
        ledger.close()


def test_an_unreachable_database_is_one_line_without_the_password(tmp_path: Path) -> None:
    url = f"postgresql://agent:s3cr3t-pw@/ledger?host={tmp_path}"  # no server listens there
    started = time.monotonic()
    with pytest.raises(LedgerUnavailableError) as failed:
        PostgresLedger(url)
    assert time.monotonic() - started < 5
    error = failed.value
    line = error.one_line()
    assert "s3cr3t-pw" not in line and "\n" not in line
    assert f"database 'ledger' on {tmp_path}" in line
    assert "start the database or fix --ledger/applyonce.ledger" in error.hint
    assert error.exit_code == 4 and error.retryable and error.kind == "ledger-unavailable"


def test_a_server_that_never_answers_fails_within_the_connect_timeout() -> None:
    """A listening socket that accepts and says nothing (a wedged server)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(LedgerUnavailableError, match=f"on 127.0.0.1:{port}"):
            PostgresLedger(f"postgresql://agent:pw@127.0.0.1:{port}/ledger", connect_timeout=2)
        assert time.monotonic() - started < 4.5


def test_a_held_row_lock_is_busy_after_the_lock_timeout(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connection, "LOCK_TIMEOUT_S", 0.3)
    ledger = PostgresLedger(pg_url)
    try:
        ledger.claim(IDENT, ref=REF, owner=ELSEWHERE)
        with psycopg.connect(pg_url) as holder:  # a stuck client inside its transaction
            holder.execute("SELECT 1 FROM calls WHERE call_id = %s FOR UPDATE", (IDENT.call_id,))
            started = time.monotonic()
            with pytest.raises(LedgerBusyError, match="is busy"):
                ledger.claim(IDENT, ref=REF, owner=ME)
            assert time.monotonic() - started < 3
        with pytest.raises(CallBusyError):  # the lock gone, the claim is judged as usual
            ledger.claim(IDENT, ref=REF, owner=ME)
    finally:
        ledger.close()


def test_rows_read_back_are_untrusted(pg_url: str) -> None:
    ledger = PostgresLedger(pg_url)
    try:
        ledger.claim(IDENT, ref=REF, owner=ME)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE events SET data = 'not json'")
            with pytest.raises(LedgerError, match="malformed event"):
                ledger.events(IDENT.call_id)
            conn.execute("UPDATE calls SET call_id = 'not-a-call-id'")
            with pytest.raises(LedgerError, match="malformed row"):
                ledger.calls()
            conn.execute("DROP TABLE events")
            with pytest.raises(LedgerError, match="could not be read or written"):
                ledger.events()
    finally:
        ledger.close()


# --- the worker's own server (pg_server), restarted and killed under the ledger -----------------


@pytest.mark.parametrize("how", ["restart", "kill"])
def test_a_lost_connection_is_one_line_and_the_next_use_reconnects(
    pg_server: PostgresServer, how: str
) -> None:
    ledger = PostgresLedger(pg_server.create_database())
    try:
        claim = ledger.claim(IDENT, ref=REF, owner=ME)
        # Durable (a claim alone is not: a crash of the server may lose it, and with it the
        # claimant's connection, so the claimant stops before anything takes effect).
        ledger.record(
            Event(
                IDENT.call_id, claim.execution_id, EventKind.PREPARED, RowChange(state="prepared")
            )
        )
        if how == "restart":
            pg_server.restart()
        else:
            pg_server.kill()
            pg_server.restart()
        with pytest.raises(LedgerUnavailableError, match="lost the connection") as lost:
            ledger.get(IDENT.call_id)
        assert "\n" not in lost.value.one_line() and lost.value.exit_code == 4
        row = ledger.get(IDENT.call_id)  # a new connection
        assert row is not None and row.execution_id == claim.execution_id
        assert ledger.renew(IDENT.call_id, ME) is True
    finally:
        ledger.close()
        pg_server.ensure_running()


# --- receipts in the ledger ----------------------------------------------------------------------


def _receipt(output: str) -> Receipt:
    return Receipt.of_call(IDENT, status="prepared", execution_id="e" * 32, ref=REF).with_output(
        output
    )


def test_receipts_written_on_one_clone_are_read_on_another(pg_url: str, tmp_path: Path) -> None:
    ledger = PostgresLedger(pg_url)
    try:
        a = ReceiptStore(tmp_path / "a", mirror=ledger)
        b = ReceiptStore(tmp_path / "b", mirror=lambda: ledger)  # opened when first needed
        sha = a.write(_receipt("made on a\n"))
        assert b.call_ids() == [IDENT.call_id]
        (tmp_path / "b" / "receipts").mkdir(parents=True)
        shown = b.load(IDENT.call_id, expected_sha256=sha)
        assert shown is not None and shown.output == "made on a\n"
        assert (tmp_path / "b" / "receipts" / f"{IDENT.call_id}.json").read_bytes() == (
            tmp_path / "a" / "receipts" / f"{IDENT.call_id}.json"
        ).read_bytes()  # kept as the cache
        # Settled again on b: a's file is stale; the ledger's copy is the one its row names.
        newer = b.write(_receipt("settled again on b\n"))
        again = a.load(IDENT.call_id, expected_sha256=newer)
        assert again is not None and again.output == "settled again on b\n"
        # recover's batched store keeps writing to the ledger too.
        batched = a.batch()
        last = batched.write(_receipt("settled by recover\n"))
        batched.sync()
        stored = ledger.get_receipt(IDENT.call_id)
        assert stored is not None and hashlib.sha256(stored).hexdigest() == last
        newer = b.write(_receipt("settled again on b\n"))
        # A copy that matches neither the file nor the row's digest is still tampered with.
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE receipts SET body = %s", (b"{}",))
        cache = tmp_path / "a" / "receipts" / f"{IDENT.call_id}.json"
        cache.write_bytes(cache.read_bytes().replace(b"settled", b"SETTLED"))
        with pytest.raises(ReceiptError, match="was changed after applyonce wrote it"):
            a.load(IDENT.call_id, expected_sha256=newer)
    finally:
        ledger.close()


def test_renew_from_the_heartbeat_thread_while_the_call_thread_writes(pg_url: str) -> None:
    ledger = PostgresLedger(pg_url)
    try:
        ledger.claim(IDENT, ref=REF, owner=ME, lease_seconds=5)
        renewed: list[bool] = []
        stop = threading.Event()

        def beat() -> None:
            while not stop.is_set():
                renewed.append(ledger.renew(IDENT.call_id, ME, lease_seconds=5))

        thread = threading.Thread(target=beat)
        thread.start()
        for n in range(30):
            ledger.put_receipt(IDENT.call_id, f"{n:064x}", b"{}")
        stop.set()
        thread.join(timeout=30)
        assert renewed and all(renewed)
    finally:
        ledger.close()
