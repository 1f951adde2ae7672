"""benchmarks/bench_power_loss.py runs end to end: it records the call, counts its crash states
and checks the ones asked for (a smoke test; every state runs in the benchmark itself)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.strace import needs_strace

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_power_loss.py"


@needs_strace
def test_one_state_of_a_later_call_is_counted_and_checked() -> None:
    proc = subprocess.run(
        [sys.executable, SCRIPT, "--scenario", "later", "--state", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("benchmarks/bench_power_loss.py --scenario later --state 0"), lines
    assert re.fullmatch(
        r"later: \d+ system calls traced, \d+ effects, \d+ fsyncs; \d+ distinct crash states"
        r" \(\d+ cuts x variants\) in [\d.]+ s",
        lines[1],
    ), lines[1]
    assert lines[2].startswith("  ok 0: cut "), lines[2]
    assert re.fullmatch(
        r"later: 1 states checked \(0 after Success\) in \d+ s \([\d.]+ s a state\): 1 ok,"
        r" 0 broken",
        lines[3],
    ), lines[3]
