"""Which later commit undid a commit (``undone_by``): ``git revert``'s, by its message, or one
that put the commit's paths back exactly by hand; never one that only touched them."""

from __future__ import annotations

from pathlib import Path

from applyonce.git.history import undone_by
from applyonce.git.store import GitStore
from tests.conftest import Repo, make_repo


def commit(repo: Repo, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo.path / name).write_text(text)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", message)
    return repo.head()


def test_git_revert_undoes_a_commit_even_after_other_changes(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n2\n3\n4\n5\n6\n", "b.txt": "b\n"})
    change = commit(repo, {"a.txt": "1\nTWO\n3\n4\n5\n6\n"}, "change")
    commit(repo, {"a.txt": "1\nTWO\n3\n4\n5\nSIX\n"}, "more on the same file")
    repo.git("revert", "--no-edit", change)
    reverted = repo.head()
    store = GitStore(repo.path)
    assert undone_by(store, repo.head(), change) == reverted
    assert (repo.path / "a.txt").read_text() == "1\n2\n3\n4\n5\nSIX\n"


def test_an_undo_by_hand_counts_only_when_exact(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {"a.txt": "1\n", "b.txt": "b\n"})
    change = commit(repo, {"a.txt": "2\n"}, "change")
    store = GitStore(repo.path)
    commit(repo, {"b.txt": "B\n"}, "elsewhere")
    assert undone_by(store, repo.head(), change) is None
    commit(repo, {"a.txt": "3\n"}, "changed again")
    assert undone_by(store, repo.head(), change) is None  # not back as it was
    commit(repo, {"a.txt": "1\n"}, "back")
    # Put back as it was before the change, but from "3", not from as the change left it.
    assert undone_by(store, repo.head(), change) is None
    undo = commit(repo, {"a.txt": "2\n"}, "as the change left it")
    assert undone_by(store, repo.head(), change) is None
    by_hand = commit(repo, {"a.txt": "1\n"}, "undone by hand")
    assert undone_by(store, repo.head(), change) == by_hand
    assert undo != by_hand
