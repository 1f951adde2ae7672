"""Every wait of applyonce is bounded: a lock file or a ledger held by a process that hangs makes
the next one fail after a few seconds with a one-line error (exit 4), never hang with it. The
holders here are real processes (``flock``, and a Python holding a write transaction, stopped)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from applyonce.core.identity import CallIdentity
from applyonce.state import locks
from applyonce.state.ledger import LedgerBusyError, Owner
from applyonce.state.locks import LockBusyError, file_lock
from applyonce.state.sqlite import connection
from applyonce.state.sqlite.ledger import SqliteLedger

IDENT = CallIdentity.compute("a" * 64)


@pytest.fixture
def stuck_holder() -> Iterator[object]:
    """Start a process holding ``path``'s flock, then stop it (SIGSTOP): a holder that hangs."""
    procs: list[subprocess.Popen[bytes]] = []

    def hold(path: Path) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(
            ["flock", "-x", str(path), "sh", "-c", "echo held; exec sleep 60"],
            stdout=subprocess.PIPE,
            start_new_session=True,  # flock(1) and its command share the lock: stop them all
        )
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        os.killpg(proc.pid, signal.SIGSTOP)
        procs.append(proc)
        return proc

    yield hold
    for proc in procs:
        _end(proc)


def _end(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
        os.killpg(proc.pid, signal.SIGCONT)
    proc.wait()


def test_file_lock_gives_up_after_its_wait_naming_the_lock_and_holder(
    tmp_path: Path, stuck_holder: object
) -> None:
    path = tmp_path / "sync.lock"
    holder = stuck_holder(path)  # type: ignore[operator]
    started = time.monotonic()
    with pytest.raises(LockBusyError) as busy, file_lock(path, wait=0.3):
        pytest.fail("the lock was taken while another process held it")
    assert 0.3 <= time.monotonic() - started < 2
    error = busy.value
    assert error.exit_code == 4 and error.retryable
    # /proc/locks names the process that took the lock: flock(1), the one started.
    assert error.details["pid"] == holder.pid
    assert error.one_line() == (
        f"{path} is held by process {holder.pid} for more than 0.3 s; if that process is stuck, "
        "stop it (the lock is freed when it exits); otherwise retry in a moment"
    )
    _end(holder)
    with file_lock(path, wait=0.3):  # freed when its holder died
        pass


def test_a_ledger_whose_open_lock_hangs_is_busy_not_waited_on(
    tmp_path: Path, stuck_holder: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(locks, "LOCK_WAIT_S", 0.3)
    state = tmp_path / "state"
    state.mkdir()
    stuck_holder(state / "ledger.lock")  # type: ignore[operator]
    started = time.monotonic()
    with pytest.raises(LedgerBusyError, match=r"ledger\.lock is held by process") as busy:
        SqliteLedger(state / "ledger.sqlite3")
    assert time.monotonic() - started < 2 and busy.value.exit_code == 4
    assert not (state / "ledger.sqlite3").exists()  # nothing was written


WRITER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
db.execute("INSERT INTO migrations VALUES ('held', 'now')")
print("writing", flush=True)
sys.stdin.read()
"""


def test_a_ledger_held_by_a_hung_writer_is_busy_after_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.sqlite3"
    default = SqliteLedger(path)
    assert default.db.execute("PRAGMA busy_timeout").fetchone()[0] == 5000  # finite: 5 s
    default.close()
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_S", 0.3)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == b"writing\n"
        os.kill(writer.pid, signal.SIGSTOP)  # hung inside its write transaction
        started = time.monotonic()
        with pytest.raises(LedgerBusyError, match="is busy") as busy:
            # Opening writes too (the migrations' check): that is where it waits, and gives up.
            SqliteLedger(path).claim(IDENT, ref="refs/heads/main", owner=Owner.me())
        assert time.monotonic() - started < 2 and busy.value.exit_code == 4
    finally:
        writer.kill()
        os.kill(writer.pid, signal.SIGCONT)
        writer.wait()
    ledger = SqliteLedger(path)  # the writer died: its transaction rolled back, nothing claimed
    assert ledger.get(IDENT.call_id) is None
    ledger.close()
