"""What libgit2 alone gets wrong in a user's checkout: a split index (refused before anything is
written, a sync warning after the publish) and clean/smudge filter drivers (run by the real git)."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
import pytest

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply, make_repo, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

FILTERED_PATCH = (
    "*** Begin Patch\n*** Update File: conf.txt\n@@\n-value = 1\n+value = 2\n"
    "*** Add File: new.txt\n+fresh\n*** End Patch\n"
)


def _split(repo: Repo) -> None:
    repo.git("config", "core.splitIndex", "true")
    repo.git("update-index", "--split-index")
    assert list((repo.path / ".git").glob("sharedindex.*"))


def test_a_split_index_is_refused_before_anything_is_written(repo: Repo) -> None:
    _split(repo)
    head, files = repo.head(), repo.files()
    index = (repo.path / ".git" / "index").read_bytes()
    result = apply(repo, PATCH)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a split index (core.splitIndex)" in lines[0]
    assert "git update-index --no-split-index" in lines[0]
    assert repo.head() == head and repo.files() == files
    assert (repo.path / ".git" / "index").read_bytes() == index


def test_a_split_index_after_the_publish_is_a_sync_warning_for_recover(repo: Repo) -> None:
    """The killed call held index.lock from before its publish: the user removed it by hand
    (as git's own message says), then split the index. recover's sync meets it."""
    assert (
        apply(repo, PATCH, env={"APPLYONCE_FAULT": "after-publish"}).returncode == -signal.SIGKILL
    )
    (repo.path / ".git" / "index.lock").unlink()
    _split(repo)
    result = run_cli("recover", "--repo", str(repo.path))
    assert result.returncode == 4, result.stderr  # not everything settled: the checkout
    assert "checkout not updated" in result.stdout and "split index" in result.stdout
    assert "every call is settled" not in result.stdout
    repo.git("config", "core.splitIndex", "false")
    repo.git("update-index", "--no-split-index")
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""


def _filtered_repo(tmp_path: Path) -> Repo:
    """A sed-based clean/smudge pair: the work tree shows 'smudged: ' before each line, the
    blobs do not."""
    repo = make_repo(tmp_path / "repo")
    repo.git("config", "filter.tag.clean", "sed -e 's/^smudged: //'")
    repo.git("config", "filter.tag.smudge", "sed -e 's/^/smudged: /'")
    (repo.path / ".gitattributes").write_text("*.txt filter=tag\n")
    (repo.path / "conf.txt").write_text("smudged: value = 1\n")
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", "base")
    assert repo.git("show", "HEAD:conf.txt") == "value = 1\n"
    return repo


def test_filter_drivers_clean_and_smudge_as_git_does(tmp_path: Path) -> None:
    repo = _filtered_repo(tmp_path)
    result = apply(repo, FILTERED_PATCH)
    assert result.returncode == 0, result.stderr
    assert repo.git("show", "HEAD:conf.txt") == "value = 2\n"
    written = {p: (repo.path / p).read_bytes() for p in ("conf.txt", "new.txt")}
    assert written == {"conf.txt": b"smudged: value = 2\n", "new.txt": b"smudged: fresh\n"}
    assert repo.git("status", "--porcelain") == ""
    for path in written:  # what git checkout itself writes
        (repo.path / path).unlink()
    repo.git("checkout", "--", ".")
    assert {p: (repo.path / p).read_bytes() for p in written} == written


def test_a_filter_without_a_driver_passes_through_as_in_git_unless_required(
    tmp_path: Path,
) -> None:
    repo = _filtered_repo(tmp_path)
    repo.git("config", "--unset", "filter.tag.clean")
    repo.git("config", "--unset", "filter.tag.smudge")
    repo.git("config", "filter.tag.required", "true")
    head, files = repo.head(), repo.files()
    result = apply(repo, FILTERED_PATCH, "--json")
    assert result.returncode == 2, result.stderr
    error = orjson.loads(result.stdout)["error"]
    assert error["kind"] == "filter-driver"
    assert "names the required filter 'tag', but no driver is configured" in error["message"]
    assert repo.head() == head and repo.files() == files
    repo.git("config", "--unset", "filter.tag.required")
    # git itself now passes the bytes through: the blob's bytes are the work tree's
    (repo.path / "conf.txt").write_text("value = 1\n")
    repo.git("add", "conf.txt")  # the same blob: only the stat data is refreshed
    result = apply(repo, FILTERED_PATCH.replace("new.txt", "other.txt"))  # another call
    assert result.returncode == 0, result.stderr
    assert (repo.path / "conf.txt").read_bytes() == b"value = 2\n"
    assert (repo.path / "other.txt").read_bytes() == b"fresh\n"
    assert repo.git("status", "--porcelain") == ""


def test_a_patch_adding_an_unconfigured_filter_commits_and_syncs_completely(repo: Repo) -> None:
    patch = (
        "*** Begin Patch\n*** Add File: .gitattributes\n+* filter=nope\n"
        "*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
    )
    result = apply(repo, patch)
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert repo.git("status", "--porcelain") == ""
    assert apply(repo, PATCH.replace("1", "X").replace("2", "1").replace("X", "2")).returncode == 0
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1\n"


def test_a_failing_smudge_writes_no_path_of_the_sync(tmp_path: Path) -> None:
    repo = _filtered_repo(tmp_path)
    repo.git("config", "filter.tag.smudge", "false")
    patch = (
        "*** Begin Patch\n*** Add File: a.md\n+plain\n"
        "*** Update File: conf.txt\n@@\n-value = 1\n+value = 2\n*** End Patch\n"
    )
    index = (repo.path / ".git" / "index").read_bytes()
    result = apply(repo, patch)
    assert result.returncode == 0, result.stderr
    assert "the smudge filter 'tag' failed" in result.stdout
    assert not (repo.path / "a.md").exists()
    assert (repo.path / ".git" / "index").read_bytes() == index
    repo.git("config", "filter.tag.smudge", "sed -e 's/^/smudged: /'")
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert (repo.path / "a.md").read_text() == "plain\n"
    assert repo.git("status", "--porcelain") == ""


def test_a_failing_smudge_after_the_publish_is_a_sync_warning(tmp_path: Path) -> None:
    repo = _filtered_repo(tmp_path)
    repo.git("config", "filter.tag.smudge", "false")
    result = apply(repo, FILTERED_PATCH, "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["status"] == "committed"
    assert "the checkout does not show this commit of main (it was not updated" in result.stderr
    assert "the smudge filter 'tag' failed" in result.stderr
    assert (repo.path / "conf.txt").read_bytes() == b"smudged: value = 1\n"
    repo.git("config", "filter.tag.smudge", "sed -e 's/^/smudged: /'")
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert (repo.path / "conf.txt").read_bytes() == b"smudged: value = 2\n"
    assert repo.git("status", "--porcelain") == ""


def test_a_damaged_index_is_refused_in_one_line_before_anything_is_written(repo: Repo) -> None:
    index_file = repo.path / ".git" / "index"
    index_file.write_bytes(b"DIRCgarbage")
    head, files = repo.head(), repo.files()
    result = apply(repo, PATCH)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{index_file} has no valid index header" in lines[0]
    assert repo.head() == head and repo.files() == files
    assert index_file.read_bytes() == b"DIRCgarbage"


def test_a_damaged_index_after_the_publish_is_a_sync_warning_naming_the_index(repo: Repo) -> None:
    assert (
        apply(repo, PATCH, env={"APPLYONCE_FAULT": "after-publish"}).returncode == -signal.SIGKILL
    )
    index_file = repo.path / ".git" / "index"
    good = index_file.read_bytes()
    index_file.write_bytes(good[:12] + b"garbage")
    result = run_cli("recover", "--repo", str(repo.path))
    # The call is settled, its checkout is not: recover says so (exit 4), never "settled".
    assert result.returncode == 4, result.stderr
    assert "checkout not updated" in result.stdout
    assert "not everything is settled" in result.stdout
    assert f"damaged: {index_file} cannot be read" in result.stdout
    assert "applyonce/locks" not in result.stdout and "Exception ignored" not in result.stderr
    assert index_file.read_bytes() == good[:12] + b"garbage"
    index_file.write_bytes(good)
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert repo.git("status", "--porcelain") == ""


def test_a_sparse_index_is_named_as_such_with_the_command_that_expands_it(repo: Repo) -> None:
    repo.git("sparse-checkout", "init", "--cone", "--sparse-index")
    repo.git("sparse-checkout", "set", "src")
    head, files = repo.head(), repo.files()
    index_file = repo.path / ".git" / "index"
    index = index_file.read_bytes()
    assert b"sdir" in index
    result = apply(repo, PATCH)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a sparse index (index.sparse)" in lines[0]
    assert "split" not in lines[0]
    assert repo.head() == head and repo.files() == files and index_file.read_bytes() == index
    # the hint's command, run as given, makes the call go through
    assert "git sparse-checkout init --no-sparse-index" in lines[0]
    repo.git("sparse-checkout", "init", "--no-sparse-index")
    assert b"sdir" not in index_file.read_bytes()
    result = apply(repo, PATCH.replace("VALUE = 2", "VALUE = 3"))  # another call
    assert result.returncode == 0, result.stderr
    assert (repo.path / "src/util.py").read_text() == "VALUE = 3\n"
    assert repo.git("status", "--porcelain") == ""


def test_a_skip_worktree_path_is_clean_and_only_its_index_entry_is_updated(repo: Repo) -> None:
    """What git does for a path outside a sparse checkout: no work-tree file, the index entry
    follows the branch, the skip-worktree bit stays."""
    repo.git("update-index", "--skip-worktree", "src/util.py")
    (repo.path / "src/util.py").unlink()
    result = apply(repo, PATCH)
    assert result.returncode == 0, result.stderr
    assert not (repo.path / "src/util.py").exists()
    assert repo.git("ls-files", "-v", "src/util.py") == "S src/util.py\n"
    assert repo.git("rev-parse", ":src/util.py") == repo.git("rev-parse", "HEAD:src/util.py")
    assert repo.git("status", "--porcelain") == ""
