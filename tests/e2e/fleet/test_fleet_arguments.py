"""``--ledger`` and ``--remote`` values that are refused: a one-line usage error (exit 2), nothing
written, and no secret of the URL or hostile remote name echoed back."""

from __future__ import annotations

from tests.conftest import UTIL_PATCH, Repo, Served, run_cli


def test_a_password_in_the_query_of_a_refused_ledger_url_is_never_printed(repo: Repo) -> None:
    """``--ledger`` that is not a PostgreSQL URL is refused (exit 2) by a message that repeats it:
    a password given as a query parameter (as libpq URLs allow) must not be in it."""
    before = (repo.files(), repo.head())
    run = run_cli(
        "apply",
        "-",
        "--repo",
        str(repo.path),
        "--ledger",
        "mysql://u@db.example/app?password=s3cret-token",
        input=UTIL_PATCH,
    )
    assert run.returncode == 2, run.stderr
    assert "s3cret-token" not in run.stdout + run.stderr
    assert "is not a ledger applyonce can use" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert (repo.files(), repo.head()) == before and not repo.state_dir().exists()


def test_a_ledger_url_with_a_bad_option_value_is_a_usage_error(served: Served) -> None:
    """A libpq option with a value libpq cannot read is the URL's fault, not a database that is
    down: exit 2 (usage), not 4 ('start the database ... repeat the call')."""
    repo = served.clone
    before = (repo.files(), repo.head())
    run = run_cli(
        "apply",
        "-",
        "--repo",
        str(repo.path),
        "--remote",
        "origin",
        "--ledger",
        "postgresql://u@/db?host=/nonexistent&connect_timeout=soon",
        input=UTIL_PATCH,
    )
    assert run.returncode == 2, run.stderr
    assert "connect_timeout" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert (repo.files(), repo.head()) == before and not repo.state_dir().exists()


def test_a_hostile_remote_name_is_never_echoed_in_a_command_to_run(repo: Repo) -> None:
    """``--remote '-oProxyCommand=...'``: refused (exit 2, nothing written), and the hint does not
    tell the user to run 'git remote add -oProxyCommand=... URL' (it did)."""
    before = (repo.files(), repo.head())
    for name in ("-oProxyCommand=touch pwned", "origin;id", "../x"):
        run = run_cli("apply", "-", "--repo", str(repo.path), "--remote", name, input=UTIL_PATCH)
        assert run.returncode == 2, run.stderr
        assert "git remote add" not in run.stderr, run.stderr
        assert "is not a remote name" in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
    assert (repo.files(), repo.head()) == before and not repo.state_dir().exists()
