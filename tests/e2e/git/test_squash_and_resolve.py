"""A squash by hand that keeps the calls' trailers, then ``resolve --as rewritten``: audit is clean."""

from __future__ import annotations

from tests.conftest import UTIL_PATCH, Repo, apply, run_cli


def test_squash_that_keeps_the_call_trailers_then_resolve_rewritten_leaves_audit_clean(
    repo: Repo,
) -> None:
    """'resolve --as rewritten' is for a call whose commit was reset *or squashed* away. A squash
    (git rebase -i 'squash' with the call's commit last) keeps the call's message, trailers
    included, in the squashed commit, beside the user's other change. After the person records
    the rewrite, audit must list the call as rewritten and exit 0, and recover must not turn the
    committed call into 'unknown' saying the patch never ran (it did: its change is there)."""
    assert apply(repo, UTIL_PATCH).returncode == 0
    call_id = repo.call_ids()[0]
    call_message = repo.git("log", "-1", "--format=%B")
    (repo.path / "notes.txt").write_text("mine\n")
    repo.git("add", "notes.txt")
    repo.git("commit", "-q", "-m", "user work")
    repo.git("reset", "-q", "--soft", "HEAD~2")
    repo.git("commit", "-q", "-m", f"user work\n\n{call_message}")  # the call's paragraph last
    assert repo.call_ids() == [call_id]
    resolved = run_cli(
        "resolve", call_id, "--as", "rewritten", "--note", "squashed", "--repo", str(repo.path)
    )
    assert resolved.returncode == 0, resolved.stderr
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 0, audit.stdout + audit.stderr
    run_cli("recover", "--repo", str(repo.path))
    log = run_cli("log", "--repo", str(repo.path))
    assert "unknown" not in log.stdout, log.stdout
