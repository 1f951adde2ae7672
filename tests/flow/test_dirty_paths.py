"""Uncommitted work in the checkout: a dirty, staged or untracked path the patch touches is a
conflict and survives; edits elsewhere are kept."""

from __future__ import annotations

from tests.conftest import APP_PATCH as PATCH
from tests.conftest import Repo, apply


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
