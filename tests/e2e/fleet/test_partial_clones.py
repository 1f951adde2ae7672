"""Calls in a partial clone (``git clone --filter=blob:none`` or ``--filter=tree:0``): the trees
and blobs it has not got are fetched from its promisor remote when applyonce reads them, as git
fetches them, so apply, recover and audit work (with ``--remote`` and without); a promisor remote
that cannot be reached is one line and exit 4, never a traceback, and nothing is written."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Repo, Served, apply, make_repo, run_cli
from tests.e2e.support import apply_remote, assert_linear, server_calls

pytestmark = pytest.mark.sampled(every=2, by="module")

FILTERS = ["blob:none", "tree:0"]
UTIL_AGAIN = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 5\n+VALUE = 6\n*** End Patch\n"
)


def partial_clone(url: str, into: Path, spec: str) -> Repo:
    subprocess.run(["git", "clone", "-q", f"--filter={spec}", url, str(into)], check=True)
    return Repo(into)


def _another_clone_changes_util(served: Served, tmp_path: Path) -> None:
    """src/util.py changes on the server after the partial clone was made: its new blob (and,
    for tree:0, the new trees) are not in the partial clone."""
    other = served.another_clone(tmp_path / "other")
    (other.path / "src/util.py").write_text("VALUE = 5\n")
    other.git("commit", "-q", "-am", "five")
    other.git("push", "-q", "origin", "main")


@pytest.mark.parametrize("spec", FILTERS)
def test_a_partial_clone_applies_recovers_and_audits_with_a_remote(
    served: Served, tmp_path: Path, spec: str
) -> None:
    served.server_git("config", "uploadpack.allowFilter", "true")
    served.server_git("config", "uploadpack.allowAnySHA1InWant", "true")
    clone = partial_clone(served.url, tmp_path / "partial", spec)
    _another_clone_changes_util(served, tmp_path)
    done = apply_remote(clone, UTIL_AGAIN, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    receipt = json.loads(done.stdout)
    assert server_calls(served) == [receipt["call_id"]]
    assert_linear(served)
    # The checkout caught up with the other clone's commit, then took the call's.
    assert (clone.path / "src/util.py").read_text() == "VALUE = 6\n"
    assert clone.git("status", "--porcelain") == ""
    for command in ("recover", "audit"):
        run = run_cli(command, "--repo", str(clone.path), "--remote", "origin")
        assert run.returncode == 0, command + run.stdout + run.stderr
    # Another partial clone, knowing nothing of it, finds the call on the remote.
    fresh = partial_clone(served.url, tmp_path / "fresh", spec)
    again = apply_remote(fresh, UTIL_AGAIN, "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["replayed"] is True
    recovered = run_cli("recover", "--repo", str(fresh.path), "--remote", "origin")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert server_calls(served) == [receipt["call_id"]]


def _local_partial_clone(tmp_path: Path, spec: str) -> tuple[Repo, Repo]:
    """A partial clone of a local repository, and a branch ``feature`` in it at a commit the
    clone has fetched but never checked out (its changed blob is not here)."""
    origin = make_repo(tmp_path / "origin", {"src/util.py": "VALUE = 1\n", "b.txt": "b\n"})
    origin.git("config", "uploadpack.allowFilter", "true")
    origin.git("config", "uploadpack.allowAnySHA1InWant", "true")
    clone = partial_clone(f"file://{origin.path}", tmp_path / "partial", spec)
    (origin.path / "src/util.py").write_text("VALUE = 5\n")
    origin.git("commit", "-q", "-am", "five")
    clone.git("fetch", "-q", "origin")
    clone.git("branch", "-q", "feature", "origin/main")
    return origin, clone


@pytest.mark.parametrize("spec", FILTERS)
def test_a_partial_clone_applies_with_checks_on_its_own_branch(tmp_path: Path, spec: str) -> None:
    _, clone = _local_partial_clone(tmp_path, spec)
    done = apply(clone, UTIL_AGAIN, "--branch", "feature", "--check", "cat b.txt", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    receipt = json.loads(done.stdout)
    assert clone.git("show", "feature:src/util.py") == "VALUE = 6\n"
    assert receipt["checks"][-1]["exit_code"] == 0
    audited = run_cli("audit", "--repo", str(clone.path), "--ref", "feature")
    assert audited.returncode == 0, audited.stdout + audited.stderr
    recovered = run_cli("recover", "--repo", str(clone.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr


def test_a_promisor_remote_that_cannot_be_reached_is_one_line_and_nothing_written(
    tmp_path: Path,
) -> None:
    _, clone = _local_partial_clone(tmp_path, "blob:none")
    clone.git("remote", "set-url", "origin", f"file://{tmp_path / 'gone'}")
    refs, files = clone.git("for-each-ref"), clone.files()
    done = apply(clone, UTIL_AGAIN, "--branch", "feature", "--json")
    assert done.returncode == 4, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["kind"] == "object-unavailable", error
    assert "partial clone" in error["message"]
    line = done.stderr.strip()
    assert line.startswith("error: ") and len(line.splitlines()) == 1
    assert "Traceback" not in done.stderr
    assert (clone.git("for-each-ref"), clone.files()) == (refs, files)
    assert not clone.state_dir().exists()
