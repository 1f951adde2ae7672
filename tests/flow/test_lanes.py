"""Lanes through the Python API (``Executor.open_lane``, ``Executor.land``), and in the Git
situations of the matrix: a linked worktree, a checkout that lags its branch, a shallow clone."""

from __future__ import annotations

import subprocess
from pathlib import Path

from applyonce import CallOptions, Executor
from tests.conftest import UTIL_PATCH, Repo, git, run_cli

ADD_NOTES = "*** Begin Patch\n*** Add File: docs/notes.md\n+notes\n*** End Patch\n"


def test_open_lane_then_land_once(repo: Repo) -> None:
    with Executor(repo.path) as executor:
        lane = executor.open_lane("a")
        assert lane == "agent/a"
        assert executor.open_lane("a") == "agent/a"  # idempotent: made once
        receipt = executor.apply(UTIL_PATCH, CallOptions(branch=lane))
        assert receipt.status == "committed" and receipt.ref == "refs/heads/agent/a"
        report = executor.land("a")
        assert report.exit_code == 0 and report.blocked == []
        (landed,) = report.landed
        assert (landed.call_id, landed.lane_commit) == (receipt.call_id, receipt.commit)
        landing = executor.show(landed.landing_call_id)
        assert landing.status == "committed" and landing.ref == "refs/heads/main"
        assert landing.tool == "land_patch"
        again = executor.land()
        assert again.landed == [] and again.already == 1
        assert executor.audit().clean
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"


def test_a_lane_from_a_linked_worktree_lands_on_main_and_syncs_its_checkout(
    repo: Repo, tmp_path: Path
) -> None:
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", "-b", "feature", str(linked))
    with Executor(linked) as executor:
        lane = executor.open_lane("w", onto="main")
        assert executor.apply(ADD_NOTES, CallOptions(branch=lane)).status == "committed"
        report = executor.land("w", onto="main")
        assert len(report.landed) == 1, report
    # main is checked out in the first work tree: it shows the landing, nothing left dirty.
    assert (repo.path / "docs/notes.md").read_text() == "notes\n"
    assert repo.git("status", "--porcelain") == ""
    assert git(linked, "status", "--porcelain") == ""
    assert not (linked / "docs/notes.md").exists()  # feature is not the target


def test_a_checkout_that_lags_its_branch_is_brought_up_by_the_landing(repo: Repo) -> None:
    with Executor(repo.path) as executor:
        lane = executor.open_lane("a")
        executor.apply(UTIL_PATCH, CallOptions(branch=lane))
    # main moves behind its checkout's back (another tool's update-ref): the checkout lags.
    tree = repo.git("write-tree").strip()
    (repo.path / "other.txt").write_text("other\n")
    repo.git("add", "other.txt")
    moved_tree = repo.git("write-tree").strip()
    repo.git("reset", "-q", "other.txt")
    (repo.path / "other.txt").unlink()
    assert tree != moved_tree
    moved = repo.git("commit-tree", moved_tree, "-p", "main", "-m", "elsewhere").strip()
    repo.git("update-ref", "refs/heads/main", moved)
    with Executor(repo.path) as executor:
        report = executor.land("a")
        assert len(report.landed) == 1, report
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert (repo.path / "other.txt").read_text() == "other\n"
    assert repo.git("status", "--porcelain") == ""


def test_a_lane_in_a_shallow_clone_is_refused_in_one_line_writing_nothing(
    repo: Repo, tmp_path: Path
) -> None:
    repo.git("commit", "-q", "--allow-empty", "-m", "second")
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{repo.path}", str(shallow)], check=True
    )
    refs = git(shallow, "for-each-ref")
    applied = run_cli("apply", "-", "--repo", str(shallow), "--lane", "s", input=UTIL_PATCH)
    # Without the whole history (and no remote commit point), "not yet applied" cannot be known.
    assert applied.returncode == 4, applied.stderr
    assert applied.stderr.startswith("error: the history of refs/heads/agent/s is incomplete")
    assert "git fetch --unshallow" in applied.stderr
    assert len(applied.stderr.splitlines()) == 1
    assert git(shallow, "for-each-ref") == refs  # no lane was made
    assert git(shallow, "status", "--porcelain") == ""
    landed = run_cli("land", "--repo", str(shallow), "--all")
    assert landed.returncode == 0 and "0 landed on main" in landed.stdout
