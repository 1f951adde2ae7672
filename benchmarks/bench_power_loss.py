"""Power-loss benchmark: every crash state of one real call, recovered and checked.

    python3 benchmarks/bench_power_loss.py [--scenario first|later|group|all] [--state N]… [--keep]

Records one ``applyonce apply`` (a Codex patch that updates, adds and deletes a file) under strace
in a fresh repository, in the repository's first call (``first``: the call creates the state
directory) and in a later one (``later``), rebuilds every state the disk can hold after a power
cut in it, and checks each: ``applyonce recover``, the same call again, exactly one commit with
the Call-Id, the reported commit kept once the call printed Success, ``git fsck --strict``,
``applyonce audit``, the ledger's integrity (tests/durability/powercut.py says how the states are
built). Where recover or the call refuses because of a lock file it cannot prove its own and says
to remove it, the lock is removed as the message says and both run again: such states are counted
apart. ``group``: the same over a group of three calls through the Python API
(``powercut.record_group``: one chain, one ref move; each call then checked). Prints the number of
states, how many broke and how, and the time taken.

``--state N`` runs only those states (numbers as printed), ``--keep`` leaves the repositories.
"""

from __future__ import annotations

import argparse
import collections
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import GIT_ENV
from tests.durability import powercut


def run_scenario(scenario: str, root: Path, only: list[int]) -> int:
    """Record the call of ``scenario``, check its states; returns how many broke."""
    started = time.perf_counter()
    if scenario == "group":
        rec = powercut.record_group(powercut.prepare(root / "repo", "later"))
    else:
        rec = powercut.record(powercut.prepare(root / "repo", scenario), powercut.PATCH)
    states, variants = powercut.crash_states(rec)
    print(
        f"{scenario}: {len(rec.calls)} system calls traced, {len(rec.model.effects)} effects,"
        f" {len(rec.model.barriers)} fsyncs; {len(states)} distinct crash states"
        f" ({variants} cuts x variants) in {time.perf_counter() - started:.1f} s",
        flush=True,
    )
    broken: list[tuple[int, powercut.Verdict]] = []
    by_hand: collections.Counter[str] = collections.Counter()
    reported = 0
    started = time.perf_counter()
    for number, state in enumerate(states):
        if only and number not in only:
            continue
        verdict = powercut.check(rec, state)
        reported += state.reported
        for lock in verdict.removed:
            by_hand[lock] += 1
        if verdict.problems:
            broken.append((number, verdict))
            after = " (after Success)" if state.reported else ""
            print(f"  BROKEN {number}{after}: {state.label}", flush=True)
            for problem in verdict.problems:
                print(f"    {problem}", flush=True)
        elif only:
            print(f"  ok {number}: {state.label}; {verdict.removed} {verdict.notes}")
        if not only and (number + 1) % 50 == 0:
            print(f"  … {number + 1} states, {time.perf_counter() - started:.0f} s", flush=True)
    checked = len(only) if only else len(states)
    elapsed = time.perf_counter() - started
    print(
        f"{scenario}: {checked} states checked ({reported} after Success) in {elapsed:.0f} s"
        f" ({elapsed / max(checked, 1):.1f} s a state): {checked - len(broken)} ok,"
        f" {len(broken)} broken"
    )
    for lock, count in sorted(by_hand.items()):
        print(f"  {count} state(s) left {lock} to remove by hand (a lock not provably applyonce's)")
    kinds = collections.Counter(p.split(":")[0] for _, v in broken for p in v.problems)
    for kind, count in kinds.most_common():
        print(f"  broken by {kind}: {count}")
    return len(broken)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=[*powercut.SCENARIOS, "group", "all"], default="all")
    parser.add_argument("--state", type=int, action="append", default=[])
    parser.add_argument("--keep", action="store_true")
    ns = parser.parse_args()
    print("$ " + shlex.join([Path(sys.executable).name, *sys.argv]))
    base = Path(tempfile.mkdtemp(prefix="applyonce-bench-powerloss-"))
    os.environ.update(GIT_ENV)
    os.environ["HOME"] = str(base / "home")
    os.environ.pop("APPLYONCE_FAULT", None)
    (base / "home").mkdir()
    broken = 0
    try:
        for scenario in [*powercut.SCENARIOS, "group"] if ns.scenario == "all" else [ns.scenario]:
            broken += run_scenario(scenario, base / scenario, ns.state)
    finally:
        if ns.keep:
            print(f"(repositories left in {base})")
        else:
            shutil.rmtree(base, ignore_errors=True)
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
