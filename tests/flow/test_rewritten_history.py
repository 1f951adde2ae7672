"""A call whose commit was rewritten under it: reset away, it is not reported as a success;
amended, recover records it again."""

from __future__ import annotations

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply, run_cli


def test_a_call_whose_commit_was_reset_away_does_not_report_success(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    repo.git("reset", "-q", "--hard", "HEAD~1")
    again = apply(repo, PATCH)
    assert again.returncode == 5
    assert "no longer on refs/heads/main (the branch was reset or rewritten)" in again.stderr
    assert "new attempt" in again.stderr
    assert apply(repo, PATCH, "--attempt", "2").returncode == 0


def test_recover_re_records_a_call_whose_commit_was_amended(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    repo.git("commit", "-q", "--amend", "--no-edit", "--date", "2001-01-01T00:00:00")
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 1
    result = run_cli("recover", "--repo", str(repo.path))
    assert "its commit was rewritten (amend, rebase); rebuilt it from commit" in result.stdout
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
