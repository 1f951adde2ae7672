"""A call's commit cherry-picked to another branch is a copy, not the call: its record stays on
the call's own branch, and neither branch's audit nor recover flips it between the two."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git, make_repo, run_cli

PATCH = "*** Begin Patch\n*** Update File: f.txt\n@@\n a\n-b\n+B\n c\n*** End Patch\n"


def test_a_cherry_picked_call_stays_on_its_branch_and_both_audits_are_clean(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "r", {"f.txt": "a\nb\nc\n"}).path
    git(repo, "branch", "side")
    first = run_cli("apply", "-", "--repo", str(repo), input=PATCH)
    assert first.returncode == 0, first
    own = git(repo, "rev-parse", "main").strip()
    git(repo, "checkout", "-q", "side")
    git(repo, "cherry-pick", "-x", "main")
    git(repo, "checkout", "-q", "main")
    call_id = git(repo, "log", "-1", "--format=%(trailers:key=Call-Id,valueonly)", own).strip()

    side = run_cli("audit", "--ref", "refs/heads/side", "--repo", str(repo))
    assert side.returncode == 0, side
    assert "copy a call that landed on another branch" in side.stdout
    for _ in range(2):  # recover is idempotent: nothing to move, twice
        recovered = run_cli("recover", "--repo", str(repo))
        assert recovered.returncode == 0, recovered
        assert "rebuilt" not in recovered.stdout
    shown = run_cli("show", call_id[:12], "--json", "--repo", str(repo))
    assert f'"commit":"{own}"' in shown.stdout.replace(" ", "")
    assert '"ref":"refs/heads/main"' in shown.stdout.replace(" ", "")
    main = run_cli("audit", "--repo", str(repo))
    assert main.returncode == 0, main
