"""The sampled suites (tests/conftest.py, the ``sampled`` marker): with APPLYONCE_TEST_SAMPLE set,
one cell in six of the situations matrix runs, at least one of each state, the rest reported as
deselected; six seeds in a row run every cell; unset, every cell runs. A module sampled as a
whole runs half its tests a seed, and all of them in two."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _collected(
    seed: str | None, where: str = "tests/situations/test_matrix.py::test_cell"
) -> tuple[set[str], str]:
    env = {k: v for k, v in os.environ.items() if k != "APPLYONCE_TEST_SAMPLE"}
    if seed is not None:
        env["APPLYONCE_TEST_SAMPLE"] = seed
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0"]
    command += ["-p", "no:cacheprovider", where]
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
    lines = proc.stdout.splitlines()
    if where.endswith("::test_cell"):
        cells = {line.split("[", 1)[1][:-1] for line in lines if "::test_cell[" in line}
    else:
        cells = {line for line in lines if line.startswith(where + "::")}
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


def test_a_module_sampled_by_module_runs_half_its_tests_a_seed_and_all_in_two() -> None:
    module = "tests/e2e/calls/test_hooks.py"
    whole, _ = _collected(None, module)
    assert len(whole) >= 4
    runs = []
    for seed in ("40", "41"):
        tests, summary = _collected(seed, module)
        assert tests < whole and abs(len(tests) - len(whole) / 2) <= 1, (len(tests), len(whole))
        assert f"({len(whole) - len(tests)} deselected)" in summary, summary
        runs.append(tests)
    assert runs[0] | runs[1] == whole and not runs[0] & runs[1]


def _states(cells: set[str]) -> list[str]:
    from tests.situations.test_matrix import COLUMNS

    ends = sorted(COLUMNS, key=len, reverse=True)
    out = []
    for cell in cells:
        column = next(c for c in ends if cell.endswith("-" + c))
        out.append(re.sub(f"-{re.escape(column)}$", "", cell))
    return out
