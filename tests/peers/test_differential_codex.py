"""applyonce's Codex ``apply_patch`` against the real Codex binary, on seeded model-style patches.

Each case (``tests/peers/codex_differential.py``) is a random small tree and a Codex patch over it,
applied by the real ``codex`` binary (pinned, ``@openai/codex@0.169.0``) and by applyonce's pure
engine. Every case must be derived exactly by the harness's oracle: with its switches off it must
reproduce Codex byte for byte, with them on applyonce; so where the two tools differ, the difference
is one of the documented ones (``SWITCHES``), never a silent one.

The binary: ``$APPLYONCE_CODEX_BIN``, else the cache folder ``.ci/run`` installs it in. Missing, the
test is skipped, unless ``APPLYONCE_REQUIRE_CODEX=1`` (CI), then it fails.
``benchmarks/bench_codex_differential.py`` runs as many seeds as asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.peers.codex_differential import codex_binary_or_skip, find_codex_binary, run_case

# Found at import: the autouse fixture points HOME at a temp dir before each test runs.
BINARY = find_codex_binary()
CHUNKS = [range(start, start + 50) for start in range(0, 300, 50)]  # spread over xdist workers


@pytest.fixture
def binary() -> str:
    return codex_binary_or_skip(BINARY)


@pytest.mark.parametrize("seeds", CHUNKS, ids=[f"{r.start}-{r.stop - 1}" for r in CHUNKS])
def test_every_difference_from_codex_is_a_documented_one(
    seeds: range, binary: str, tmp_path: Path
) -> None:
    problems = []
    for seed in seeds:
        case = run_case(seed, binary=binary, workdir=tmp_path)
        # A refusal where Codex put every hunk where it was made for is a disagreement, and it
        # too must be derived by the oracle (the places the patch leaves open, named).
        if case.verdict not in ("agree", "explained", "refused-codex-right"):
            problems.append(case.describe())
    assert not problems, f"{len(problems)} case(s) not explained:\n\n" + "\n\n".join(problems)


def test_the_harness_sees_an_unexplained_difference(
    binary: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broken engine (added lines always end in ``\\n``) must be caught, or the test above is
    vacuous: the oracle, not a list of expected outcomes, decides."""
    import applyonce.patch.apply as apply_module

    monkeypatch.setattr(apply_module._Text, "dominant_end", lambda self: "\n")
    verdicts = {run_case(seed, binary=binary, workdir=tmp_path).verdict for seed in range(40)}
    assert "unexplained" in verdicts
