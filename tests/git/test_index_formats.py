"""What libgit2 alone gets wrong in a user's checkout: a split index (refused before anything is
written, a sync warning after the publish) and clean/smudge filter drivers (run by the real git)."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply, make_repo, run_cli

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
    assert apply(repo, PATCH, env={"APPLYONCE_FAULT": "after-publish"}).returncode == -signal.SIGKILL
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


def test_a_filter_without_a_driver_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    repo = _filtered_repo(tmp_path)
    repo.git("config", "--unset", "filter.tag.clean")
    repo.git("config", "--unset", "filter.tag.smudge")
    head, files = repo.head(), repo.files()
    result = apply(repo, FILTERED_PATCH, "--json")
    assert result.returncode == 2, result.stderr
    error = orjson.loads(result.stdout)["error"]
    assert error["kind"] == "filter-driver"
    assert "names the filter 'tag', but no driver is configured" in error["message"]
    assert repo.head() == head and repo.files() == files


def test_a_failing_smudge_after_the_publish_is_a_sync_warning(tmp_path: Path) -> None:
    repo = _filtered_repo(tmp_path)
    repo.git("config", "filter.tag.smudge", "false")
    result = apply(repo, FILTERED_PATCH, "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["status"] == "committed"
    assert "warning: committed, but the checkout was not updated" in result.stderr
    assert "the smudge filter 'tag' failed" in result.stderr
    assert (repo.path / "conf.txt").read_bytes() == b"smudged: value = 1\n"
    repo.git("config", "filter.tag.smudge", "sed -e 's/^/smudged: /'")
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    assert (repo.path / "conf.txt").read_bytes() == b"smudged: value = 2\n"
    assert repo.git("status", "--porcelain") == ""
