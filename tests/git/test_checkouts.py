"""The user's checkouts after a call: linked worktrees, eol filters, a symlink replaced by a file,
a sync that failed after the publish, and an edit made on the old file before a recover."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import orjson
import pytest

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply, make_repo, run_cli

pytestmark = pytest.mark.sampled(every=2, by="module")


def test_linked_worktree_apply_syncs_and_guards_the_main_checkout(
    repo: Repo, tmp_path: Path
) -> None:
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", str(linked), "-b", "feature")
    (repo.path / "src/util.py").write_text("VALUE = 1  # mine\n")
    refused = run_cli("apply", "-", "--repo", str(linked), "--branch", "main", input=PATCH)
    assert refused.returncode == 4 and "uncommitted changes" in refused.stderr
    repo.git("checkout", "--", "src/util.py")
    done = run_cli("apply", "-", "--repo", str(linked), "--branch", "main", input=PATCH)
    assert done.returncode == 0, done.stderr
    assert repo.git("status", "--porcelain") == ""
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"


def test_eol_filters_are_respected(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path / "r", {".gitattributes": "*.txt text eol=crlf\n", "a.txt": "one\ntwo\n"}
    )
    (repo.path / "a.txt").unlink()
    repo.git("checkout", "--", "a.txt")
    assert (repo.path / "a.txt").read_bytes() == b"one\r\ntwo\r\n"
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+three\n*** Add File: b.txt\n+b\n*** End Patch\n"
    result = apply(repo, patch)
    assert result.returncode == 0, result.stderr
    assert (repo.path / "a.txt").read_bytes() == b"one\r\nthree\r\n"
    assert (repo.path / "b.txt").read_bytes() == b"b\r\n"
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("show", "HEAD:a.txt") == "one\nthree\n"


def test_sync_failure_after_publish_is_a_warning_not_a_failure(repo: Repo) -> None:
    lock = repo.path / ".git" / "index.lock"
    lock.write_text("")
    result = apply(repo, PATCH, "--json")
    assert result.returncode == 0, result.stderr
    receipt = orjson.loads(result.stdout)
    assert receipt["status"] == "committed"
    assert [note["command"] for note in receipt["checkout_behind"]] == ["applyonce recover"]
    assert "the checkout does not show this commit of main (it was not updated" in result.stderr
    lock.unlink()
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert repo.git("status", "--porcelain") == ""


def test_symlink_replaced_by_added_file(repo: Repo) -> None:
    os.symlink("README.md", repo.path / "link")
    repo.git("add", "link")
    repo.git("commit", "-q", "-m", "link")
    # A symlink is replaced by deleting it first (an Add File onto it is refused: it exists).
    replace = (
        '[{"command": "delete", "path": "link"},'
        ' {"command": "create", "path": "link", "file_text": "plain\\n"}]'
    )
    result = apply(repo, replace)
    assert result.returncode == 0, result.stderr
    assert not (repo.path / "link").is_symlink()
    assert (repo.path / "link").read_text() == "plain\n"
    assert (repo.path / "README.md").read_text() == "# demo\n"
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("ls-tree", "HEAD", "link").split()[0] == "100644"


def test_recover_warns_that_an_edit_made_on_the_old_file_would_undo_the_commit(repo: Repo) -> None:
    crashed = apply(repo, PATCH, env={"APPLYONCE_FAULT": "after-publish"})
    assert crashed.returncode == -signal.SIGKILL
    (repo.path / "src/util.py").write_text("VALUE = 1  # my 3 a.m. edit\n")
    first = run_cli("recover", "--repo", str(repo.path))
    assert "left your uncommitted changes in src/util.py" in first.stdout
    assert "would undo that commit there" in first.stdout
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1  # my 3 a.m. edit\n"
    # Still not in sync: the next recover says it again, until the user has merged.
    assert (
        "left your uncommitted changes in src/util.py"
        in run_cli("recover", "--repo", str(repo.path)).stdout
    )
    (repo.path / "src/util.py").write_text("VALUE = 2\n")
    assert "left your uncommitted" not in run_cli("recover", "--repo", str(repo.path)).stdout
