"""Coverage-guided fuzzing of the executor with atheris (optional: ``pip install atheris``).

    python3 benchmarks/fuzz_atheris.py -runs=5000 -seed=1 [CORPUS_DIR] [other libFuzzer flags]

libFuzzer's bytes drive the strategies of ``tests/fuzz/inputs.py`` (hypothesis's
``fuzz_one_input``), and each case goes through ``Executor.call`` in-process on a real repository
with the properties of ``tests/fuzz/harness.py``. applyonce's modules are instrumented, so
libFuzzer keeps the inputs that reach new code. A case that breaks a property (an internal error,
a write on failure, a bad commit) raises, and libFuzzer saves it as ``crash-*``. At exit: the
cases run so far and their outcomes, every 250 cases (libFuzzer prints its coverage itself).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

with atheris.instrument_imports(include=["applyonce"]):
    from tests.fuzz.harness import Harness
    from tests.fuzz.inputs import Case, cases

from hypothesis import HealthCheck, given, settings

CASES_PER_REPO = 500
PAD = 4096
REPORT_EVERY = 250
TOP = tempfile.TemporaryDirectory(prefix="aofuzz-atheris-")
STARTED = time.perf_counter()
TOTALS: Counter[str] = Counter()
state: dict[str, Harness] = {}


def harness() -> Harness:
    current = state.get("h")
    if current is None or sum(current.outcomes.values()) >= CASES_PER_REPO:
        if current is not None:
            TOTALS.update(current.outcomes)
            current.close()
        current = state["h"] = Harness(Path(TOP.name) / f"r{sum(TOTALS.values())}")
    return current


@settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cases())
def one(case: Case) -> None:
    h = harness()
    result = h.run(case)
    if not result.ok:
        raise AssertionError(h.report())


def report() -> None:
    totals = TOTALS + (state["h"].outcomes if "h" in state else Counter())
    run = sum(totals.values())
    elapsed = time.perf_counter() - STARTED
    print(
        f"atheris: {run} cases in {elapsed:.1f} s, 0 failures so far; "
        f"outcomes: {dict(totals.most_common())}",
        file=sys.stderr,
        flush=True,
    )


def test_one_input(data: bytes) -> None:
    # Padded with zero bytes, from which the strategies draw their simplest choices: libFuzzer
    # starts from a few bytes, too few for a whole case, and every input must run one.
    one.hypothesis.fuzz_one_input(data + bytes(PAD))
    run = sum(TOTALS.values()) + sum(state["h"].outcomes.values())
    if run % REPORT_EVERY == 0:
        report()  # libFuzzer ends the process with exit(): no atexit handler would run


def main() -> None:
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
