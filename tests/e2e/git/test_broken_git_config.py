"""A repository whose Git config cannot be read: a one-line usage error, never a traceback."""

from __future__ import annotations

from tests.conftest import UTIL_PATCH, Repo, apply


def test_a_broken_git_config_is_a_one_line_usage_error_not_an_internal_error(repo: Repo) -> None:
    """A typo in .git/config (which applyonce now reads its options from) is the user's to fix,
    as git says ('fatal: bad config line …'); it is not an internal error (exit 3, a crash log,
    and a hint to run 'applyonce recover', which fails the same way)."""
    head = repo.head()
    config = repo.path / ".git" / "config"
    good = config.read_text()
    config.write_text(good + "[applyonce\n")
    for args in (("--dry-run",), ()):
        run = apply(repo, UTIL_PATCH, *args)
        assert run.returncode == 2, run.stderr
        assert run.stderr.startswith("error: cannot open the repository: ")
        assert "config" in run.stderr and "crash" not in run.stderr
        assert len(run.stderr.splitlines()) == 1
    config.write_text(good)  # git itself cannot read the repository until then
    assert repo.head() == head
    assert not repo.state_dir().exists()
