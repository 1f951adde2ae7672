"""Where a fleet of clones shares its record and its commit point: ``--ledger URL`` and
``--remote NAME`` on every command that opens a repository, else git config ``applyonce.ledger``
and ``applyonce.remote`` (the flags win). A value applyonce cannot use is a usage error naming
where it came from, never printing a password, before anything is written."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.conftest import APP_PATCH as PATCH
from tests.conftest import Repo, apply, git, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

COMMANDS = ("apply", "revert", "recover", "audit", "log", "show", "replay", "resolve", "mcp")


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_ledger_and_remote(command: str) -> None:
    helped = run_cli(command, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "--ledger" in helped.stdout and "--remote" in helped.stdout, helped.stdout


def test_recover_takes_lease_seconds(repo: Repo) -> None:
    refused = run_cli("recover", "--repo", str(repo.path), "--lease-seconds", "0.01")
    assert refused.returncode == 2
    assert "--lease-seconds must be a number of seconds" in refused.stderr


def _nothing_written(repo: Repo, head: str) -> None:
    assert repo.head() == head
    assert not repo.state_dir().exists(), sorted(p.name for p in repo.state_dir().iterdir())
    assert repo.git("status", "--porcelain") == ""


def test_a_ledger_that_is_no_url_is_refused_before_anything_is_written(repo: Repo) -> None:
    head = repo.head()
    result = apply(repo, PATCH, "--ledger", "mysql://app:s3cret@db/app")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: --ledger 'mysql://app:***@db/app' is not a ledger applyonce can use; "
    ), result.stderr
    assert "s3cret" not in result.stderr and "Traceback" not in result.stderr
    assert "postgresql://" in result.stderr
    _nothing_written(repo, head)


def test_the_config_ledger_is_named_and_the_flag_wins(repo: Repo) -> None:
    head = repo.head()
    repo.git("config", "applyonce.ledger", "redis://cache")
    refused = apply(repo, PATCH)
    assert refused.returncode == 2
    assert "applyonce.ledger 'redis://cache' is not a ledger" in refused.stderr
    _nothing_written(repo, head)
    # The flag wins: 'local' is the repository's own ledger file, whatever the config says.
    done = apply(repo, PATCH, "--ledger", "local", "--json")
    assert done.returncode == 0, done.stderr
    assert (repo.state_dir() / "ledger.sqlite3").exists()
    assert repo.head() == orjson.loads(done.stdout)["commit"]


def test_an_unknown_remote_is_refused_and_dot_means_the_own_branch(repo: Repo) -> None:
    head = repo.head()
    refused = apply(repo, PATCH, "--remote", "upstream")
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        "error: --remote names 'upstream', but this repository has no remote of that name"
    ), refused.stderr
    assert "git remote add upstream URL" in refused.stderr
    _nothing_written(repo, head)
    repo.git("config", "applyonce.remote", "upstream")
    from_config = run_cli("log", "--repo", str(repo.path))
    assert from_config.returncode == 2
    assert "applyonce.remote names 'upstream'" in from_config.stderr
    done = apply(repo, PATCH, "--remote", ".", "--json")
    assert done.returncode == 0, done.stderr
    assert repo.head() == orjson.loads(done.stdout)["commit"]


def test_one_call_is_one_call_id_in_every_clone(repo: Repo, tmp_path: Path) -> None:
    """The identity does not depend on where the clone is: the same patch (even one spelling
    its paths absolute, inside each clone) is the same Call-Id in two clones."""
    clones = [tmp_path / "a" / "deep" / "clone", tmp_path / "b"]
    ids = []
    for clone in clones:
        git(tmp_path, "clone", "-q", str(repo.path), str(clone))
        absolute = PATCH.replace("src/app.py", f"{clone}/src/app.py")
        for text in (PATCH, absolute):
            Path(clone / "p.patch").write_text(text)
            plan = run_cli(
                "apply", "--dry-run", "--json", "--repo", str(clone), str(clone / "p.patch")
            )
            assert plan.returncode == 0, plan.stderr
            ids.append(orjson.loads(plan.stdout)["call_id"])
    assert len(set(ids)) == 1, ids


def test_a_shared_ledger_without_a_remote_is_refused_before_anything_is_written(
    repo: Repo,
) -> None:
    """Each clone's own branch cannot be the commit point of a ledger the clones share: one
    clone's committed call is not on the next clone's branch (which then says "unknown, run
    recover" for ever). Refused when the repository is opened, whatever the command, before the
    database is even asked; the password never printed."""
    head = repo.head()
    url = "postgresql://agent:s3cret@db.invalid/fleet"
    for command in (["apply", "-"], ["recover"], ["log"], ["audit"]):
        run = run_cli(*command, "--repo", str(repo.path), "--ledger", url, input=PATCH)
        assert run.returncode == 2, [*command, run.stdout, run.stderr]
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            "error: --ledger names a shared ledger, but no remote is the commit point"
        ), run.stderr
        assert "--remote NAME" in lines[0] and "s3cret" not in run.stdout + run.stderr
        _nothing_written(repo, head)
    repo.git("config", "applyonce.ledger", url)
    from_config = apply(repo, PATCH, "--json")
    assert from_config.returncode == 2
    assert orjson.loads(from_config.stdout)["error"]["kind"] == "ledger-needs-remote"
    assert "applyonce.ledger names a shared ledger" in from_config.stderr
    _nothing_written(repo, head)
