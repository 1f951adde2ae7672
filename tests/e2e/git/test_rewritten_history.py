"""A call whose commit was rewritten under it: reset away, it is not reported as a success;
amended, recover records it again."""

from __future__ import annotations

import pytest

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")


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
    assert (
        "its commit was rewritten by the user (amend, rebase); rebuilt it from commit"
        in result.stdout
    )
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0


def _rewritten_then_recorded(repo: Repo, own: str, added: str = "") -> None:
    """Audit names the rewrite and the command that records it; recover records it; then audit
    is clean, show tells it, and a repeat of the call replays it (nothing runs again)."""
    rewrite = repo.head()
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 1
    [line] = [line for line in audit.stdout.splitlines() if not line.startswith("audited")]
    assert line.startswith("user-rewrite ")
    assert (
        f"commit {rewrite[:12]} is the user's rewrite (amend, rebase) of the call's commit "
        f"{own[:12]} and carries its change{added}; run 'applyonce recover' to record it" in line
    )
    assert "forged" not in audit.stdout and "never ran" not in audit.stdout
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert (
        "its commit was rewritten by the user (amend, rebase); rebuilt it from commit "
        f"{rewrite[:12]}{added.replace(', and also', ', which also')}" in recovered.stdout
    )
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
    call_id = repo.call_ids()[0]
    shown = run_cli("show", call_id, "--repo", str(repo.path))
    assert f"commit    {rewrite}" in shown.stdout
    assert (
        f"note      rewritten by the user (amend, rebase): commit {own[:12]} became "
        f"{rewrite[:12]}" in shown.stdout
    )
    files = repo.files()
    again = apply(repo, PATCH)
    assert again.returncode == 0, again.stderr
    assert f"replayed call {call_id[:12]}: its commit {rewrite[:12]}" in again.stderr
    assert repo.head() == rewrite and repo.files() == files


def test_an_amend_that_adds_a_file_keeps_the_calls_change_and_is_a_rewrite(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    own = repo.head()
    (repo.path / "extra.txt").write_text("mine\n")
    repo.git("add", "extra.txt")
    repo.git("commit", "-q", "--amend", "--no-edit")
    # Repeated before recover, the call is not sent on to a new attempt (that would apply its
    # change twice): recover is what records the rewrite.
    early = apply(repo, PATCH)
    assert early.returncode == 5
    assert f"commit {repo.head()[:12]} there carries its Call-Id (rewritten by the user" in (
        early.stderr
    )
    assert "run 'applyonce recover' to record it, then repeat the call" in early.stderr
    assert "new attempt" not in early.stderr
    _rewritten_then_recorded(repo, own, added=", and also changes extra.txt")


def test_a_rebase_onto_a_new_parent_is_a_rewrite(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    own = repo.head()
    repo.git("checkout", "-q", "-b", "side", "HEAD~1")
    (repo.path / "other.txt").write_text("other\n")
    repo.git("add", "other.txt")
    repo.git("commit", "-q", "-m", "other")
    repo.git("checkout", "-q", "main")
    repo.git("rebase", "-q", "side")
    assert repo.git("log", "-1", "--format=%P").strip() == repo.git("rev-parse", "side").strip()
    _rewritten_then_recorded(repo, own)


def test_a_cherry_pick_after_a_reset_is_a_rewrite(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    own = repo.head()
    repo.git("reset", "-q", "--hard", "HEAD~1")
    (repo.path / "other.txt").write_text("other\n")
    repo.git("add", "other.txt")
    repo.git("commit", "-q", "-m", "other")
    repo.git("cherry-pick", own)
    _rewritten_then_recorded(repo, own)


def test_an_amend_that_changes_the_calls_own_change_is_not_taken_for_it(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    own = repo.head()
    (repo.path / "src/util.py").write_text("VALUE = 3\n")
    repo.git("commit", "-q", "-a", "--amend", "--no-edit")
    changed = repo.head()
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 1
    assert (
        f"changed      {repo.call_ids()[0][:12]}  commit {changed[:12]} rewrote the call's "
        f"commit {own[:12]} with another change to its files (changed by the user)"
    ) in audit.stdout
    assert "never ran" not in audit.stdout
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 5
    assert f"commit {changed[:12]} rewrote its commit {own[:12]}" in recovered.stdout
    again = apply(repo, PATCH)
    assert again.returncode == 5 and "Success" not in again.stdout + again.stderr
    assert (repo.path / "src/util.py").read_text() == "VALUE = 3\n"
    assert repo.head() == changed
