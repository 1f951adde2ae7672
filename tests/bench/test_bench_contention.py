"""benchmarks/bench_contention.py runs end to end: two agents, the three modes, one SIGKILLed
agent and queue, one table whose duplicates and lost work are all 0 (no timing asserted: the
numbers of a shared machine mean nothing here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_contention.py"


def test_a_small_run_lands_all_work_once_in_every_mode(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--agents", "2", "--calls", "3", "--kill", "--keep", tmp_path],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split(" | ") for line in proc.stdout.splitlines() if line.startswith("| ")]
    by_mode = {cells[0].removeprefix("| "): cells for cells in rows[1:]}
    assert set(by_mode) == {"branch", "lanes", "worktrees"}
    for mode, cells in by_mode.items():
        duplicates, lost, kills = cells[9], cells[10], cells[11].removesuffix(" |")
        assert (duplicates, lost) == ("0", "0"), mode
        assert kills == ("0" if mode == "worktrees" else "1" if mode == "branch" else "2"), mode
    # Every piece of work of the applyonce rows landed on main (the killed calls too).
    assert by_mode["lanes"][2] == "6" and by_mode["lanes"][8] == "0"
    assert by_mode["branch"][2] == "6" and by_mode["branch"][8] == "0"
