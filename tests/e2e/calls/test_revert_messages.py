"""What ``applyonce revert`` says: a hint that names an option revert accepts, and a repeated revert
reported as replayed, as a repeated apply is."""

from __future__ import annotations

from tests.conftest import UTIL_PATCH, Repo, apply, run_cli


def test_revert_dirty_path_hint_names_an_option_revert_accepts(repo: Repo) -> None:
    """revert refuses a dirty touched path (exit 4); its hint must not tell the user to pass
    '--dirty commit', which 'applyonce revert' refuses as a usage error (exit 2)."""
    done = apply(repo, UTIL_PATCH)
    assert done.returncode == 0, done.stderr
    call_id = repo.call_ids()[0]
    (repo.path / "src/util.py").write_text("VALUE = 2\nMINE = 1\n")
    refused = run_cli("revert", call_id, "--repo", str(repo.path))
    assert refused.returncode == 4, refused.stderr
    if "--dirty commit" in refused.stderr:
        tried = run_cli("revert", call_id, "--repo", str(repo.path), "--dirty", "commit")
        assert tried.returncode != 2, (refused.stderr, tried.stderr)


def test_a_repeated_revert_says_it_was_replayed_as_apply_does(repo: Repo) -> None:
    """A repeat of 'apply' prints one 'replayed call …' line on stderr and '"replayed": true'
    with --json; a repeat of 'revert' (also an exactly-once call) says neither, so a caller
    cannot tell a revert that ran from one returned as stored."""
    assert apply(repo, UTIL_PATCH).returncode == 0
    call_id = repo.call_ids()[0]
    first = run_cli("revert", call_id, "--repo", str(repo.path), "--json")
    assert first.returncode == 0, first.stderr
    again = run_cli("revert", call_id, "--repo", str(repo.path), "--json")
    assert again.returncode == 0, again.stderr
    assert '"replayed": true' in again.stdout
    assert "replayed call" in again.stderr
