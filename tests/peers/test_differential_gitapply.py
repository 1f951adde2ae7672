"""applyonce's pure engine against the real ``git apply``, on seeded random diffs.

Each case (``tests/peers/differential.py``) makes random text files and random edits, lets the real
``git diff`` write the patch (random context size, diff algorithm, rename/copy detection,
prefixes, quoted names), and applies it with ``git apply`` and with ``parse`` + ``plan``:

* on the exact base, both must produce the same bytes and executable bits, every time (a
  ``--no-prefix`` diff, which both read with ``-p1``, may instead be refused by both);
* on a drifted base (lines inserted and deleted, so hunks sit away from their line numbers), both
  must fail or produce the same bytes, except for the differences by design the harness names
  (whitespace-lenient matches, context-less hunks, ``\\ No newline`` hunks git joins mid-file).

A bounded number of seeds runs here; ``benchmarks/bench_differential.py`` runs as many as asked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.peers.differential import run_case

EXACT_SEEDS = range(0, 120)
DRIFT_SEEDS = range(1000, 1120)
BY_DESIGN = {"agree", "lenient", "context-less", "eof-marker"}

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git CLI")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("differential")


def test_git_diff_output_applies_exactly_like_git_apply(workdir: Path) -> None:
    for seed in EXACT_SEEDS:
        case = run_case(seed, workdir=workdir)
        # A --no-prefix diff loses each name's first directory (git apply's -p1): git may refuse
        # it, and then applyonce must too.
        assert case.git.tree is not None or "--no-prefix" in case.diff_args, case.describe()
        assert case.verdict == "agree", case.describe()


def test_on_a_drifted_base_both_fail_or_agree(workdir: Path) -> None:
    verdicts: dict[str, int] = {}
    applied_at_an_offset = 0
    for seed in DRIFT_SEEDS:
        case = run_case(seed, drift=True, workdir=workdir)
        assert case.verdict in BY_DESIGN, case.describe()
        verdicts[case.verdict] = verdicts.get(case.verdict, 0) + 1
        applied_at_an_offset += case.verdict == "agree" and case.git.tree is not None
    assert verdicts["agree"] >= len(DRIFT_SEEDS) * 0.9
    # Not only refusals: many drifted cases apply, in both, with hunks found away from their
    # line numbers.
    assert applied_at_an_offset >= len(DRIFT_SEEDS) * 0.2


def test_the_harness_sees_a_disagreement(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken engine (hunks placed one line off) must be caught, or the test above is vacuous."""
    import applyonce.patch.apply as apply_module

    original = apply_module._Image.replace

    def off_by_one(self, start, hunk, old_count, *rest):  # type: ignore[no-untyped-def]
        if start + old_count < len(self.bodies) and all(line.kind != "-" for line in hunk.lines):
            start += 1
        original(self, start, hunk, old_count, *rest)

    monkeypatch.setattr(apply_module._Image, "replace", off_by_one)
    verdicts = {run_case(seed, workdir=workdir).verdict for seed in EXACT_SEEDS[:30]}
    assert "disagree" in verdicts
