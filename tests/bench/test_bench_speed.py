"""benchmarks/bench_speed.py runs end to end and prints its one table (a smoke test, no timing
asserted: the numbers of a shared machine mean nothing here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_speed.py"


def test_quick_rows_print_one_table_with_every_column(tmp_path: Path) -> None:
    rows = "inproc,indexwrite"
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--quick", "--rows", rows, "--sizes", "1000", "--keep", tmp_path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("machine: ") and " cores, Linux " in lines[0]
    assert lines[1].startswith("python ") and "libgit2 " in lines[1] and "git " in lines[1]
    assert re.fullmatch(r"date: \d{4}-\d\d-\d\d \d\d:\d\d UTC", lines[2])
    header = lines.index("| what | median | spread (min\u2013max) | N | command |")
    table = []
    for line in lines[header + 2 :]:
        if not line.startswith("| "):
            break
        table.append([cell.strip() for cell in line.strip("|").split(" | ")])
    assert [len(row) for row in table] == [5] * 4
    for what, median, spread, n, command in table:
        assert re.fullmatch(r"[\d.,]+ ms", median), median
        assert re.fullmatch(r"[\d.,]+ ms \u2013 [\d.,]+ ms", spread), spread
        row = "inproc" if "Executor(repo).apply" in what else "indexwrite"
        assert n == {"inproc": "8", "indexwrite": "5"}[row], (what, n)
        assert command == f"`python3 benchmarks/bench_speed.py --quick --rows {row} --sizes 1000`"
    # Every call committed: 3 warm-up and 8 timed calls on the checkout.
    count = subprocess.run(
        ["git", "-C", tmp_path / "ck-1000", "rev-list", "--count", "main"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert count.stdout.strip() == str(1 + 3 + 8)


def test_an_unknown_row_is_refused() -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--rows", "inproc,nope"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "unknown row(s) nope" in proc.stderr
    assert proc.stdout == ""
