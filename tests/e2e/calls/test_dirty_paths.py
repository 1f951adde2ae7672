"""Uncommitted work in the checkout: a dirty, staged or untracked path the patch touches is a
conflict and survives; edits elsewhere are kept."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import APP_PATCH as PATCH
from tests.conftest import Repo, apply

pytestmark = pytest.mark.sampled(every=2, by="module")


def test_dirty_path_is_a_conflict_and_user_work_survives(repo: Repo) -> None:
    (repo.path / "src/app.py").write_text("my own edit\n")
    head = repo.head()
    result = apply(repo, PATCH)
    assert result.returncode == 4
    assert result.stderr.startswith("error: src/app.py has uncommitted changes")
    assert (repo.path / "src/app.py").read_text() == "my own edit\n"
    assert repo.head() == head
    # Once the user's change is gone, the same call runs (a dirty-path rejection is retryable).
    repo.git("checkout", "--", "src/app.py")
    assert apply(repo, PATCH).returncode == 0
    assert repo.commit_count() == 2


def test_untracked_file_where_patch_adds_is_a_conflict(repo: Repo) -> None:
    (repo.path / "tests").mkdir()
    (repo.path / "tests/test_app.py").write_text("mine\n")
    result = apply(repo, PATCH)
    assert result.returncode == 4
    assert "tests/test_app.py is untracked" in result.stderr
    assert (repo.path / "tests/test_app.py").read_text() == "mine\n"


def test_staged_change_is_dirty_too(repo: Repo) -> None:
    (repo.path / "src/app.py").write_text("staged\n")
    repo.git("add", "src/app.py")
    (repo.path / "src/app.py").write_text("def greet(name):\n    return 'hello ' + name\n")
    assert apply(repo, PATCH).returncode == 4


def test_untouched_user_edits_are_kept(repo: Repo) -> None:
    (repo.path / "README.md").write_text("# my notes\n")
    assert apply(repo, PATCH).returncode == 0
    assert (repo.path / "README.md").read_text() == "# my notes\n"
    assert repo.git("status", "--porcelain") == " M README.md\n"


DOCS = "*** Begin Patch\n*** Add File: docs/x.md\n+x\n*** End Patch\n"


def _untouched(repo: Repo) -> tuple[str, bytes, str]:
    """What a refused call must leave as it was: the branch, the index, git's view of the rest."""
    index = (repo.path / ".git" / "index").read_bytes()
    return repo.head(), index, repo.git("status", "--porcelain", "--untracked-files=all")


def test_an_untracked_file_where_the_patch_adds_says_to_move_or_add_it(repo: Repo) -> None:
    """'git stash' leaves an untracked file where it is, and --dirty commit never commits one:
    the hint names what settles it."""
    (repo.path / "tests").mkdir()
    (repo.path / "tests/test_app.py").write_text("mine\n")
    before = _untouched(repo)
    result = apply(repo, PATCH)
    assert result.returncode == 4
    root = repo.path.resolve()
    assert result.stderr == (
        f"error: tests/test_app.py is untracked in the checkout at {root}; move it away or"
        " 'git add' it, then repeat the call\n"
    )
    assert _untouched(repo) == before


@pytest.mark.parametrize("dirty", ["refuse", "commit"])
def test_an_unmerged_path_is_refused_as_a_conflict_to_resolve(repo: Repo, dirty: str) -> None:
    """A path with a merge conflict is neither an untracked file nor an edit to commit."""
    repo.git("checkout", "-q", "-b", "side")
    (repo.path / "src/app.py").write_text("theirs\n")
    repo.git("commit", "-qam", "side")
    repo.git("checkout", "-q", "main")
    (repo.path / "src/app.py").write_text("ours\n")
    repo.git("commit", "-qam", "main")
    merged = subprocess.run(
        ["git", "-C", str(repo.path), "merge", "-q", "side"], capture_output=True, text=True
    )
    assert merged.returncode == 1
    assert repo.git("status", "--porcelain").startswith("UU src/app.py")
    before = _untouched(repo)
    result = apply(repo, PATCH, "--dirty", dirty)
    assert result.returncode == 4
    root = repo.path.resolve()
    assert result.stderr == (
        f"error: src/app.py has an unresolved merge conflict in the checkout at {root}; resolve"
        " the conflict ('git add src/app.py' or 'git rm src/app.py' once resolved), then repeat"
        " the call\n"
    )
    assert _untouched(repo) == before
    assert (repo.path / ".git" / "MERGE_HEAD").exists()


@pytest.mark.parametrize("dirty", ["refuse", "commit"])
@pytest.mark.parametrize("what", ["file", "symlink"])
def test_an_untracked_file_or_symlink_where_a_folder_of_an_added_path_is_refused(
    repo: Repo, tmp_path: Path, what: str, dirty: str
) -> None:
    """Below a file, the call's file cannot be written (the sync would leave its deletion
    staged, undone by the user's next commit); below a symlink, it would be written wherever
    that points. Refused before the publish: nothing is written."""
    outside = tmp_path / "outside"
    outside.mkdir()
    if what == "file":
        (repo.path / "docs").write_text("mine\n")
    else:
        os.symlink(outside, repo.path / "docs")
    before = _untouched(repo)
    result = apply(repo, DOCS, "--dirty", dirty)
    assert result.returncode == 4
    root = repo.path.resolve()
    kind = "an untracked file" if what == "file" else "an untracked symbolic link"
    assert result.stderr == (
        f"error: docs is {kind} in the checkout at {root}, in the way of docs/x.md; move it"
        " away, then repeat the call\n"
    )
    assert _untouched(repo) == before
    assert list(outside.iterdir()) == []
    if what == "file":
        assert (repo.path / "docs").read_text() == "mine\n"


def test_a_staged_file_where_a_folder_of_an_added_path_is_refused(repo: Repo) -> None:
    (repo.path / "docs").write_text("mine\n")
    repo.git("add", "docs")
    before = _untouched(repo)
    result = apply(repo, DOCS)
    assert result.returncode == 4
    root = repo.path.resolve()
    assert result.stderr == (
        f"error: docs is a staged file in the checkout at {root}, in the way of docs/x.md;"
        " unstage it ('git rm --cached docs') and move it away, then repeat the call\n"
    )
    assert _untouched(repo) == before


def test_an_untracked_directory_where_the_patch_adds_a_file_is_refused(repo: Repo) -> None:
    (repo.path / "docs").mkdir()
    (repo.path / "docs/y.md").write_text("mine\n")
    before = _untouched(repo)
    result = apply(repo, "*** Begin Patch\n*** Add File: docs\n+x\n*** End Patch\n")
    assert result.returncode == 4
    root = repo.path.resolve()
    assert result.stderr == (
        f"error: docs is a directory in the checkout at {root}, where the call writes a file;"
        " move it away, then repeat the call\n"
    )
    assert _untouched(repo) == before
    assert (repo.path / "docs/y.md").read_text() == "mine\n"
