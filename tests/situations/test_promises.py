"""The matrix's checks can fail: each promise, broken by hand after a real call, is caught."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Run, git, run_cli
from tests.situations.promises import (
    Landing,
    Snapshot,
    assert_landed,
    assert_refused,
    call_ids,
    tip,
)
from tests.situations.states import MAIN, Situation, fresh_clone, refused


def _landed_then(tmp_path: Path, damage: Callable[[Situation], None]) -> None:
    """A real call in a fresh clone, ``damage`` done by hand, then the matrix's check."""
    sit = fresh_clone(tmp_path / "situation")
    before, base = Snapshot.take(sit), tip(sit.repo, MAIN)
    (tmp_path / "patch.txt").write_text(sit.patch)
    run = run_cli("apply", str(tmp_path / "patch.txt"), "--repo", str(sit.repo), cwd=sit.repo)
    assert run.returncode == 0, run.stderr
    damage(sit)
    assert_landed(sit, before, Landing(sit.repo, MAIN, base, sit.blobs))


def test_the_check_passes_an_undamaged_call(tmp_path: Path) -> None:
    _landed_then(tmp_path, lambda sit: None)


def test_a_second_commit_with_the_call_id_is_caught(tmp_path: Path) -> None:
    def land_twice(sit: Situation) -> None:
        call = call_ids(sit.repo, MAIN)[0]
        git(sit.repo, "commit", "-q", "--allow-empty", "-m", f"again\n\nCall-Id: {call}")

    with pytest.raises(AssertionError, match="Call-Id"):
        _landed_then(tmp_path, land_twice)


def test_a_user_file_changed_is_caught(tmp_path: Path) -> None:
    def overwrite(sit: Situation) -> None:
        (sit.repo / "README.md").write_bytes(b"# demo\n")

    with pytest.raises(AssertionError, match="files of clone the call does not touch"):
        _landed_then(tmp_path, overwrite)


def test_a_rewritten_fetch_head_is_caught(tmp_path: Path) -> None:
    def fetch(sit: Situation) -> None:
        git(sit.repo, "fetch", "-q", "origin", "main")

    with pytest.raises(AssertionError, match="FETCH_HEAD"):
        _landed_then(tmp_path, fetch)


def test_a_stale_touched_path_is_caught(tmp_path: Path) -> None:
    def stale(sit: Situation) -> None:
        old = git(sit.repo, "rev-parse", f"{MAIN}~1:src/app.py").strip()
        git(sit.repo, "update-index", "--cacheinfo", f"100644,{old},src/app.py")

    with pytest.raises(AssertionError, match=r"src/app\.py's index entry is not the branch's"):
        _landed_then(tmp_path, stale)


def test_a_refusal_that_wrote_a_ref_is_caught(tmp_path: Path) -> None:
    sit = fresh_clone(tmp_path / "situation")
    before = Snapshot.take(sit)
    git(sit.repo, "branch", "written-by-the-refusal")
    said = Run(2, "", "error: refused; do something\n")
    with pytest.raises(AssertionError, match="refs changed"):
        assert_refused(sit, before, said, refused(r"refused", 2), lambda: said)


def test_a_refusal_of_two_lines_is_caught(tmp_path: Path) -> None:
    sit = fresh_clone(tmp_path / "situation")
    before = Snapshot.take(sit)
    said = Run(2, "", "error: refused\nTraceback (most recent call last):\n")
    with pytest.raises(AssertionError):
        assert_refused(sit, before, said, refused(r"refused", 2), lambda: said)
