"""benchmarks/bench_serve.py runs end to end and prints its table (a smoke test, no timing
asserted: the numbers of a shared machine mean nothing here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_serve.py"


def test_one_call_a_row_prints_every_row(tmp_path: Path) -> None:
    argv = ["--runs", "1", "--calls", "1", "--files", "300", "--no-instructions"]
    proc = subprocess.run(
        [sys.executable, SCRIPT, *argv, "--keep", tmp_path],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("$ python3 benchmarks/bench_serve.py --runs 1")
    header = lines.index(
        "| what | median | spread of the runs' medians | instructions (the client) |"
    )
    rows = [line for line in lines[header + 2 :] if line.startswith("| ")]
    names = [row.split(" | ")[0].lstrip("| ") for row in rows]
    assert (
        names[:7]
        == [
            "`python -c pass`",
            "`applyonce apply`, a new commit, in process",
            "`applyonce apply`, a new commit, through the server",
            "`applyonce apply`, a replay, through the server",
            "`apply_patch PATCH`, a new commit, in process",
            "`apply_patch PATCH`, a new commit, through the server",
            "Codex `codex --codex-run-as-apply-patch PATCH` (files only)",
        ][: len(names)]
    )
    for row in rows:
        assert re.search(r"\| [\d.]+ ms \| [\d.]+ - [\d.]+ ms \|", row), row
    assert re.search(
        r"^goal: a cold call through the server <= 30 ms: (met|missed) \(", proc.stdout, re.M
    )
