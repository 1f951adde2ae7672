"""benchmarks/bench_fleet.py runs end to end: its own PostgreSQL server and git daemon, 1 and 2
clients on one branch and a baseline, one table (a smoke test, no timing asserted: the numbers of a
shared machine mean nothing here)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.fleet.servers import postgres_missing
from tests.gitserver import daemon_available

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_fleet.py"


def test_quick_run_prints_one_row_per_client_count_and_a_baseline(tmp_path: Path) -> None:
    for missing, what, require in (
        (postgres_missing(), "PostgreSQL", "APPLYONCE_REQUIRE_POSTGRES"),
        (not daemon_available(), "git daemon", "APPLYONCE_REQUIRE_GIT_DAEMON"),
    ):
        if missing and os.environ.get(require) == "1":
            pytest.fail(f"{what} is not installed ({require}=1)")
        if missing:
            pytest.skip(f"{what} is not installed")
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--seconds", "1", "--keep", tmp_path],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("machine: ") and " cores, Linux " in lines[0]
    assert any(line.startswith("postgresql ") and "psycopg " in line for line in lines)
    assert any(line.startswith("load average at start: ") for line in lines)
    assert "command: `python3 benchmarks/bench_fleet.py --quick --seconds 1 --keep" in proc.stdout
    header = next(i for i, line in enumerate(lines) if line.startswith("| remote | ledger |"))
    rows = []
    for line in lines[header + 2 :]:
        if not line.startswith("| "):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    assert [(r[0], r[1], r[2]) for r in rows] == [
        ("git daemon", "PostgreSQL", "1"),
        ("git daemon", "PostgreSQL", "2"),
        ("file:// bare repo", "PostgreSQL", "1"),
    ]
    for remote, _ledger, clients, calls, seconds, rate, restages, p50, p95, lost in rows:
        assert int(calls) > 0 and float(seconds) > 0 and float(rate) > 0, (remote, clients)
        assert float(restages) >= 0 and lost == "0"
        assert re.fullmatch(r"\d+ ms", p50) and re.fullmatch(r"\d+ ms", p95)
