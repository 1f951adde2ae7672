"""applyonce's state is out of a patch's reach and private to its user (issue 11, item 3).

Through the real CLI: a ``--state-dir`` a patch could write (inside the work tree, reached through a
symlink, or holding the work tree) is refused with exit 2 and nothing written; a patch path that
leads into the state directory through a symlink in the work tree is refused with exit 1; the
state files are 0600 and its folders 0700, under a umask of 022 and of 077.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.conftest import NEW_FILE_PATCH, Repo, apply, snapshot

FORGED = "0" * 64


def _add(path: str) -> str:
    return f'*** Begin Patch\n*** Add File: {path}\n+{{"status": "committed"}}\n*** End Patch\n'


def _assert_usage_refused(repo: Repo, state: Path, message: str) -> None:
    before = repo.files()
    head = repo.head()
    result = apply(repo, NEW_FILE_PATCH, "--state-dir", str(state))
    assert result.returncode == 2, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr and "--state-dir outside the work tree" in result.stderr
    assert "Traceback" not in result.stderr
    assert repo.head() == head and repo.files() == before
    assert not repo.state_dir().exists()


def test_state_dir_inside_the_work_tree_is_refused(repo: Repo) -> None:
    state = repo.path / "st"
    _assert_usage_refused(repo, state, "is inside the work tree")
    assert not state.exists()


def test_state_dir_reaching_into_the_work_tree_through_a_symlink_is_refused(
    repo: Repo, tmp_path: Path
) -> None:
    (repo.path / "st").mkdir()
    link = tmp_path / "state-link"
    os.symlink(repo.path / "st", link)
    _assert_usage_refused(repo, link, "is inside the work tree")
    assert not any((repo.path / "st").iterdir())


def test_state_dir_holding_the_work_tree_is_refused(repo: Repo) -> None:
    parent = repo.path.parent
    before = snapshot(parent)
    _assert_usage_refused(repo, parent, "contains the work tree")
    assert snapshot(parent) == before


def test_state_dir_inside_dot_git_is_accepted(repo: Repo) -> None:
    state = repo.path / ".git" / "elsewhere"
    assert apply(repo, NEW_FILE_PATCH, "--state-dir", str(state)).returncode == 0
    assert (state / "ledger.sqlite3").is_file()


def _assert_path_refused(repo: Repo, patch: str, *args: str) -> None:
    head = repo.head()
    result = apply(repo, patch, *args)
    assert result.returncode == 1, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "leads into applyonce's state directory" in result.stderr
    assert repo.head() == head
    assert repo.git("ls-tree", "-r", "--name-only", "HEAD").split() == [
        "README.md",
        "src/app.py",
        "src/util.py",
    ]


def test_patch_path_through_a_work_tree_symlink_into_the_default_state_is_refused(
    repo: Repo,
) -> None:
    assert apply(repo, NEW_FILE_PATCH).returncode == 0  # the state directory exists
    repo.git("reset", "-q", "--hard", "HEAD~1")
    os.symlink(".git/applyonce", repo.path / "st")  # untracked: not in any tree
    _assert_path_refused(repo, _add(f"st/receipts/{FORGED}.json"))
    assert not (repo.state_dir() / "receipts" / f"{FORGED}.json").exists()


def test_patch_path_through_a_symlink_into_an_outside_state_dir_is_refused(
    repo: Repo, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    os.symlink(state, repo.path / "lnk")
    _assert_path_refused(repo, _add("lnk/ledger.sqlite3"), "--state-dir", str(state))
    _assert_path_refused(repo, _add("lnk/receipts/x.json"), "--state-dir", str(state))
    assert not (state / "receipts" / "x.json").exists()


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_state_files_are_private(repo: Repo, tmp_path: Path, umask: int) -> None:
    state = tmp_path / "state" / "nested"
    listing = tmp_path / "modes.txt"
    # The check runs while the ledger is open, so SQLite's -wal and -shm files exist then.
    check = f"find {state} -path '*/scratch/*' -prune -o -printf '%m %y %P\\n' > {listing}"
    old = os.umask(umask)
    try:
        result = apply(repo, NEW_FILE_PATCH, "--state-dir", str(state), "--check", check)
    finally:
        os.umask(old)
    assert result.returncode == 0, result
    seen = {}
    for line in listing.read_text().splitlines():
        mode, kind, name = line.split(" ", 2)
        seen[name] = (int(mode, 8), kind)
    assert {"ledger.sqlite3-wal", "ledger.sqlite3-shm", "call-index.sqlite3", "ledger.lock"} <= set(
        seen
    )
    for name, (mode, kind) in seen.items():
        assert mode == (0o700 if kind == "d" else 0o600), (name, oct(mode))
    # Afterwards too: the receipt, its folder, and the folders made on the way.
    for path in [state.parent, state, state / "receipts", *(state / "receipts").iterdir()]:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))


def test_state_files_of_a_sync_killed_halfway_are_private(repo: Repo) -> None:
    # Killed while the index lock is held: the lock journal's entry remains (the index is read
    # and written beside itself, in .git, never copied into the state directory).
    old = os.umask(0o022)
    try:
        killed = apply(repo, NEW_FILE_PATCH, env={"APPLYONCE_FAULT": "during-sync"})
    finally:
        os.umask(old)
    assert killed.returncode == -9, killed
    state = repo.state_dir()
    found = [p for p in state.rglob("*") if "scratch" not in p.relative_to(state).parts]
    assert any(p.suffix == ".json" for p in found), found  # the journal's entry
    assert not any(p.suffix == ".data" for p in found), found
    for path in [state, *found]:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
