"""A power cut anywhere in a real call (tests/durability/powercut.py): after ``recover`` and the
same call again, the call is on the branch exactly once, a commit reported committed is never
lost, the checkout is in sync, ``git fsck --strict`` and ``applyonce audit`` are clean and the
ledger opens; no lock is left to the user but the branch's (by design).

Here a fixed sample of the crash states of each scenario's call, spread over the whole call;
every state runs in ``benchmarks/bench_power_loss.py``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.durability import powercut
from tests.strace import needs_strace

pytestmark = [needs_strace, pytest.mark.slow]


def _contents_after_success(tmp_path: Path, program: str) -> set[bytes]:
    """What ``f`` can hold after a power cut once ``program`` printed Success."""
    root = tmp_path / "tree"
    root.mkdir(parents=True)
    (root / "f").write_bytes(b"old")
    traced = powercut.trace(root, [sys.executable, "-c", program, str(root / "f")])
    states, _ = powercut.crash_states(traced)
    found = set()
    for state in states:
        if state.reported:
            entry = state.tree[powercut.ROOT].entries.get("f")
            found.add(bytes(state.tree[entry].data) if entry is not None else b"<missing>")
    return found


def test_the_model_loses_what_was_not_fsynced_and_keeps_what_was(tmp_path: Path) -> None:
    """The simulation itself: a file replaced without fsyncs can hold its old bytes, or none,
    after the program said Success; replaced by applyonce's atomic write, only the new ones."""
    unsafe = (
        "import os, sys\n"
        "open(sys.argv[1] + '.tmp', 'wb').write(b'new')\n"
        "os.replace(sys.argv[1] + '.tmp', sys.argv[1])\n"
        "print('Success')\n"
    )
    safe = (
        "import sys\nfrom pathlib import Path\n"
        "from applyonce.state.files import atomic_write\n"
        "atomic_write(Path(sys.argv[1]), b'new')\n"
        "print('Success')\n"
    )
    assert _contents_after_success(tmp_path / "unsafe", unsafe) == {b"new", b"old", b""}
    assert _contents_after_success(tmp_path / "safe", safe) == {b"new"}


# States checked a scenario: about 2 s each (recover, the call again, audit: three processes).
SAMPLE = 12


@pytest.mark.parametrize("scenario", powercut.SCENARIOS)
def test_a_power_cut_anywhere_in_a_call_is_recovered_exactly_once(
    tmp_path: Path, scenario: str
) -> None:
    rec = powercut.record(powercut.prepare(tmp_path / "repo", scenario), powercut.PATCH)
    states, variants = powercut.crash_states(rec)
    # Tens of cuts (every fsync, rename and unlink of the call), each with its variants.
    assert len(states) > 100 and variants > len(states), (len(states), variants)
    chosen = powercut.sample(states, SAMPLE)
    assert any(s.reported for s in chosen) and not all(s.reported for s in chosen)
    seed = os.environ.get("APPLYONCE_TEST_SAMPLE")
    if seed:  # .ci/run: every other state of the sample, the rest at the next commit
        chosen = chosen[int(seed) % 2 :: 2]
    broken = []
    for state in chosen:
        verdict = powercut.check(rec, state)
        broken += [f"{state.label}: {problem}" for problem in verdict.problems]
        # Left to the user, by design, only the branch's lock: libgit2 takes it, and its journal
        # entry is not fsynced (state/lockjournal.py); applyonce's own index.lock never.
        broken += [
            f"{state.label}: {lock} left to remove by hand"
            for lock in verdict.removed
            if lock != ".git/refs/heads/main.lock"
        ]
    assert not broken, "\n".join(broken)


# A group of three calls (docs/design.md §1, "Groups"): its own receipts, ledger flushes, one
# pack and one ref move, so its own crash states.


def test_a_power_cut_anywhere_in_a_group_is_recovered_exactly_once_for_each_call(
    tmp_path: Path,
) -> None:
    rec = powercut.record_group(powercut.prepare(tmp_path / "repo", "later"))
    assert len(rec.commits) == 3
    states, variants = powercut.crash_states(rec)
    assert len(states) > 100 and variants > len(states), (len(states), variants)
    chosen = powercut.sample(states, SAMPLE)
    seed = os.environ.get("APPLYONCE_TEST_SAMPLE")
    if seed:  # .ci/run: every other state of the sample, the rest at the next commit
        chosen = chosen[int(seed) % 2 :: 2]
    # The group said Success last: its first state after that, where every commit must stay.
    chosen.append(next(s for s in states if s.reported))
    assert not all(s.reported for s in chosen)
    broken = []
    for state in chosen:
        verdict = powercut.check(rec, state)
        broken += [f"{state.label}: {problem}" for problem in verdict.problems]
        broken += [
            f"{state.label}: {lock} left to remove by hand"
            for lock in verdict.removed
            if lock != ".git/refs/heads/main.lock"
        ]
    assert not broken, "\n".join(broken)
