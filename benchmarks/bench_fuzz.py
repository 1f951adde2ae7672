"""Fuzz the real executor with N seeded, mutated patches; count outcomes and broken properties.

    python3 benchmarks/bench_fuzz.py --cases 10000 --seed 0 [--fsck-every 50] [--show 5]

Case ``i`` is drawn by the strategies of ``tests/fuzz/inputs.py`` from the bytes of
``random.Random(f"{seed}:{i}")`` (hypothesis's ``fuzz_one_input``), so a run is reproducible and
one case can be run again alone (``--first I --cases 1``). Each goes through
``Executor.call`` in-process on a real repository (``tests/fuzz/harness.py``: one repository per
500 cases, reset to its base after each commit). Prints the cases, the outcomes (committed,
rejected by kind, refused by kind, replayed), the internal errors and the writes on failure (0 and
0 expected, each with the input that reproduces it), the commits checked by ``git fsck --strict``,
and the wall time. Exits 1 if a property broke.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hypothesis import HealthCheck, given, settings

from tests.fuzz.harness import KNOWN_ISSUES, Harness
from tests.fuzz.inputs import Case, cases

BUFFER_BYTES = 8192
CASES_PER_REPO = 500


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first", type=int, default=0, help="index of the first case")
    parser.add_argument("--fsck-every", type=int, default=50, help="fsck every Nth commit")
    parser.add_argument("--show", type=int, default=5, help="failures to print in full")
    parser.add_argument(
        "--records", type=int, default=0, help="also run this many tampered-record cases"
    )
    ns = parser.parse_args()
    status = fuzz_patches(ns)
    if ns.records:
        status |= fuzz_records(ns)
    return status


def fuzz_patches(ns: argparse.Namespace) -> int:
    """The patch cases: ``--cases`` of them from ``--seed``."""
    harness: Harness | None = None

    @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=cases())
    def one(case: Case) -> None:
        assert harness is not None
        harness.run(case)

    outcomes: Counter[str] = Counter()
    known: Counter[str] = Counter()
    failures: list[str] = []
    internal = wrote = bad_commits = commits = fscks = invalid = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aofuzz-") as top:
        for i in range(ns.first, ns.first + ns.cases):
            if harness is None or (i - ns.first) % CASES_PER_REPO == 0:
                if harness is not None:
                    harness.close()
                harness = Harness(Path(top) / f"r{i}", fsck_every=ns.fsck_every)
            rng = random.Random(f"{ns.seed}:{i}")
            before = sum(harness.outcomes.values())
            # A buffer the strategies cannot draw a whole case from is skipped for the next one
            # of the same generator: every index runs exactly one case.
            while sum(harness.outcomes.values()) == before:
                one.hypothesis.fuzz_one_input(rng.randbytes(BUFFER_BYTES))
                invalid += sum(harness.outcomes.values()) == before
            for case, result in harness.failures:
                internal += result.internal_error is not None
                wrote += bool(result.wrote_on_failure)
                bad_commits += result.bad_commit is not None
                if len(failures) < ns.show:
                    failures.append(
                        f"case {i}: {result}\n  reproduce: Case(format={case.format!r}, "
                        f"data={case.data!r})"
                    )
            harness.failures.clear()
            if (
                i - ns.first
            ) % CASES_PER_REPO == CASES_PER_REPO - 1 or i == ns.first + ns.cases - 1:
                outcomes.update(harness.outcomes)
                known.update(harness.known)
                harness.known.clear()
                commits += harness.commits
                fscks += harness.fscks
                harness.outcomes.clear()
                harness.commits = harness.fscks = 0
        if harness is not None:
            harness.close()
    elapsed = time.perf_counter() - started

    run = sum(outcomes.values())
    print(
        f"cases: {run} run (seed {ns.seed}, cases {ns.first}..{ns.first + ns.cases - 1}; "
        f"{invalid} buffers skipped: no case drawn from them)"
    )
    groups: dict[str, Counter[str]] = {}
    for label, count in outcomes.items():
        head, _, kind = label.partition(":")
        groups.setdefault(head, Counter())[kind or head] += count
    for head in ("committed", "replayed", "rejected", "refused", "internal"):
        if head in groups:
            total = sum(groups[head].values())
            kinds = ", ".join(f"{k} {n}" for k, n in groups[head].most_common() if k != head)
            print(f"  {head}: {total}" + (f" ({kinds})" if kinds else ""))
    print(f"internal errors: {internal}")
    print(f"writes on failure: {wrote}")
    print(f"bad commits: {bad_commits} (of {commits}; {fscks} checked by git fsck --strict)")
    for name, text in KNOWN_ISSUES.items():
        print(f"known issue {name}, reported, not fixed here ({known[name]} cases): {text}")
    print(f"time: {elapsed:.1f} s ({1000 * elapsed / max(run, 1):.1f} ms a case)")
    for failure in failures:
        print(failure)
    return 1 if internal or wrote or bad_commits else 0


def fuzz_records(ns: argparse.Namespace) -> int:
    """The tampered-record cases (``tests/fuzz/records.py``): ``--records`` of them."""
    from tests.fuzz.records import RecordsHarness, Tamper, tamper_cases

    failures: list[str] = []
    counts = Counter[str]()

    @settings(database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=tamper_cases())
    def one(case: list[Tamper]) -> None:
        result = records.run(case)
        counts["cases"] += 1
        counts["internal errors"] += bool(result.internal_errors)
        counts["wrong committed"] += bool(result.wrong_committed)
        counts["writes"] += bool(result.wrote)
        if not result.ok and len(failures) < ns.show:
            failures.append(f"{case}: {result}")

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aofuzz-records-") as top:
        records = RecordsHarness(Path(top))
        for i in range(ns.records):
            rng = random.Random(f"records:{ns.seed}:{i}")
            before = counts["cases"]
            while counts["cases"] == before:
                one.hypothesis.fuzz_one_input(rng.randbytes(BUFFER_BYTES))
    elapsed = time.perf_counter() - started
    print(f"tampered records: {counts['cases']} cases (seed {ns.seed})")
    for step in ("show committed", "calls", "audit", "replay", "recover", "apply committed"):
        said = ", ".join(
            f"{label.split(': ', 1)[1]} {n}"
            for label, n in records.outcomes.most_common()
            if label.startswith(step + ":")
        )
        print(f"  {step}: {said}")
    print(f"internal errors: {counts['internal errors']}")
    print(f"wrong committed: {counts['wrong committed']}")
    print(f"writes to the work tree, index or refs: {counts['writes']}")
    print(f"time: {elapsed:.1f} s")
    for failure in failures:
        print(failure)
    return 1 if counts["internal errors"] or counts["wrong committed"] or counts["writes"] else 0


if __name__ == "__main__":
    sys.exit(main())
