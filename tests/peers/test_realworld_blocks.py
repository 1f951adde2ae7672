"""Replay real history as SEARCH/REPLACE blocks: a sample of pypa/packaging's commits, each cut
into blocks by ``realworld_blocks.py`` (Aider's, Cline's and Roo's spellings in turn), must land
as one commit with the commit's exact tree; a synthetic history covers CRLF, a missing final
newline, a BOM, modes and what blocks cannot say.

The bundle is ``../shared/realworld/packaging.bundle``; without it the sample is skipped, unless
``APPLYONCE_REQUIRE_REALWORLD=1``. ``benchmarks/bench_realworld.py --formats search-replace``
replays the whole history.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.peers.realworld import (
    HARD_STEPS,
    REFUSED,
    Result,
    build_hard_history,
    non_merge_commits,
    replay,
)
from tests.peers.realworld_blocks import NO_BLOCKS
from tests.peers.test_realworld_replay import _bundle

pytestmark = pytest.mark.sampled(every=2, by="module")

EVERY = 12  # one commit in EVERY, over the whole history
CHUNKS = 3


@pytest.fixture(scope="session")
def sample() -> list[str]:
    return non_merge_commits(_bundle())[::EVERY]


def _assert_replayed(results: list[Result], commits: list[str]) -> None:
    assert [r.commit for r in results] == commits
    failed = [r for r in results if r.outcome == "failed"]
    assert not failed, "\n".join(r.line()[:600] for r in failed)
    for r in results:
        if r.outcome == "skipped":
            assert r.reason.startswith((REFUSED, NO_BLOCKS)), r.line()
    # Most real commits have a block spelling: a generator that skips everything tests nothing.
    assert sum(r.outcome == "exact" for r in results) >= 0.7 * len(results)


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_sampled_history_replays_exactly_as_blocks(sample: list[str], chunk: int) -> None:
    size = -(-len(sample) // CHUNKS)
    commits = sample[chunk * size : (chunk + 1) * size]
    _assert_replayed(replay(_bundle(), commits, "search-replace"), commits)


def test_a_few_blocks_through_the_cli(sample: list[str]) -> None:
    commits = sample[1:4]
    _assert_replayed(replay(_bundle(), commits, "search-replace", cli=run_cli), commits)


# By commit message: the skip reason, or "" for an exact replay. Derived from the rules of
# ``realworld_blocks.py`` and the applier's (blocks keep a file's endings and final-newline
# state), not from a run.
HARD_EXPECTED = {
    "base": NO_BLOCKS + "binary",
    "add a CRLF file": NO_BLOCKS + "CRLF line endings",
    "LF to CRLF": NO_BLOCKS + "line endings",
    "CRLF to LF": NO_BLOCKS + "line endings",
    "edit a CRLF line of a mixed file": NO_BLOCKS + "mixed line endings",
    "add the final newline": NO_BLOCKS + "final newline change",
    "mode change only": NO_BLOCKS + "mode change",
    "mode change and edit": NO_BLOCKS + "mode change",
    "add an executable file": NO_BLOCKS + "mode of a new file",
    "edit non-UTF-8 text": NO_BLOCKS + "non-UTF-8 text",
    "edit a binary file": NO_BLOCKS + "binary",
    "add a symlink": NO_BLOCKS + "symlink",
    "add a submodule": NO_BLOCKS + "submodule",
    "rename with an edit": NO_BLOCKS + "rename",
    "pure rename": NO_BLOCKS + "rename",
    "delete a file": NO_BLOCKS + "deletion",
    "delete the binary file": NO_BLOCKS + "binary",
}


def test_hard_cases_as_blocks(tmp_path: Path) -> None:
    """A missing final newline kept, an empty new file, a BOM, an rst heading's ``=======``
    added (content in the REPLACE part): exact; the rest named."""
    commits = build_hard_history(tmp_path / "hard")
    results = replay(tmp_path / "hard", commits, "search-replace")
    failed = [r for r in results if r.outcome == "failed"]
    assert not failed, "\n".join(r.line()[:600] for r in failed)
    got = {step[0]: r.reason for step, r in zip(HARD_STEPS, results, strict=True)}
    assert got == {step[0]: HARD_EXPECTED.get(step[0], "") for step in HARD_STEPS}
