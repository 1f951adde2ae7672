"""The sampled suites (tests/conftest.py, the ``sampled`` marker): with APPLYONCE_TEST_SAMPLE set,
one cell in six of the situations matrix runs, at least one of each state, the rest reported as
deselected; six seeds in a row run every cell; unset, every cell runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _collected(seed: str | None) -> tuple[set[str], str]:
    env = {k: v for k, v in os.environ.items() if k != "APPLYONCE_TEST_SAMPLE"}
    if seed is not None:
        env["APPLYONCE_TEST_SAMPLE"] = seed
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0"]
    command += ["-p", "no:cacheprovider", "tests/situations/test_matrix.py::test_cell"]
    proc = subprocess.run(
        command,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cells = {
        line.split("[", 1)[1][:-1] for line in proc.stdout.splitlines() if "::test_cell[" in line
    }
    return cells, proc.stdout.strip().splitlines()[-1]


def test_a_seed_runs_a_sixth_of_the_matrix_and_says_how_many_it_left() -> None:
    whole, _ = _collected(None)
    states = set(_states(whole))
    runs = []
    for seed in ("40", "41", "42", "43", "44", "45"):
        cells, summary = _collected(seed)
        assert cells < whole and len(cells) <= len(whole) // 4, (len(cells), len(whole))
        assert f"({len(whole) - len(cells)} deselected)" in summary, summary
        assert set(_states(cells)) == states  # every state has a cell in every run
        runs.append(cells)
    assert set().union(*runs) == whole  # six commits in a row run every cell


def _states(cells: set[str]) -> list[str]:
    from tests.situations.test_matrix import COLUMNS

    ends = sorted(COLUMNS, key=len, reverse=True)
    out = []
    for cell in cells:
        column = next(c for c in ends if cell.endswith("-" + c))
        out.append(re.sub(f"-{re.escape(column)}$", "", cell))
    return out
