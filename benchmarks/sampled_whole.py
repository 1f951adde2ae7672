"""Run the sampled suites whole: every case of every test marked ``sampled`` (pyproject.toml).

    python3 benchmarks/sampled_whole.py [PYTEST ARGS…]

.ci/run sets ``APPLYONCE_TEST_SAMPLE`` so that these slow real-process suites (the situations
matrix, the power cuts, the replays against Codex and real history…) run one case in a few; this
runs all of their cases, and the tests it runs smaller (marked ``scaled``: the fleet
simulation, and its lanes mode tests/e2e/fleet/test_lanes_fleet_simulation.py with its merge
queue) at their full size over both Git servers, with the variable unset, and prints pytest's
slowest cases and the time taken. The README's test command runs them whole too, with the rest
of the suite. Extra arguments go to pytest (``-n 0``, ``-x``, a path…).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    env = {k: v for k, v in os.environ.items() if k != "APPLYONCE_TEST_SAMPLE"}
    command = [sys.executable, "-m", "pytest", "-q", "-m", "sampled or scaled", "--durations=20"]
    command += ["-p", "no:cacheprovider", *sys.argv[1:]]
    started = time.monotonic()
    code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
    print(f"sampled suites, whole: exit {code} in {time.monotonic() - started:.0f} s")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
