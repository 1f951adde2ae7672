"""Two repositories whose clones share one PostgreSQL database as their ledger stay independent:
``recover`` in one never settles the other's calls (it did: a call that had landed in the other
was settled "rejected, nothing took effect"), and one patch sent to both is a call in each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.conftest import UTIL_PATCH, Repo, Served, make_repo, run_cli

pytestmark = pytest.mark.sampled(every=2, by="module")


def _another_repository(git_daemon: Any, tmp_path: Path) -> tuple[Repo, Path]:
    """An unrelated repository on the same git daemon (its own first commit), and a clone."""
    url = git_daemon.make_bare()
    seed = make_repo(tmp_path / "seed-b", {"src/util.py": "VALUE = 1\n", "b.txt": "b\n"})
    seed.git("push", "-q", url, "main:refs/heads/main")
    return Repo(git_daemon.clone(url, tmp_path / "clone-b")), git_daemon.path_of(url)


def _fleet(clone: Repo, pg_url: str, *args: str, env: dict[str, str] | None = None) -> Any:
    return run_cli(
        *args, "--repo", str(clone.path), "--ledger", pg_url, "--remote", "origin",
        input=UTIL_PATCH if args[0] == "apply" else None, env=env,
    )  # fmt: skip


def _calls(server: Path) -> list[str]:
    from tests.conftest import git

    out = git(server, "log", "--format=%(trailers:key=Call-Id,valueonly)", "main")
    return [line.strip() for line in out.splitlines() if line.strip()]


def test_recover_in_one_repository_never_settles_anothers_call(
    served: Served, git_daemon: Any, pg_url: str, tmp_path: Path
) -> None:
    other, other_server = _another_repository(git_daemon, tmp_path)
    killed = _fleet(served.clone, pg_url, "apply", "-", env={"APPLYONCE_FAULT": "after-publish"})
    assert killed.returncode == -9
    [call_id] = _calls(served.server)  # it landed; its record says it is in flight
    elsewhere = _fleet(other, pg_url, "recover", "--json")
    assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr
    assert json.loads(elsewhere.stdout)["outcomes"] == []  # not its call to settle
    with psycopg.connect(pg_url) as conn:
        states = conn.execute("SELECT state FROM calls WHERE call_id = %s", (call_id,)).fetchall()
    assert states == [("prepared",)]
    own = _fleet(served.clone, pg_url, "recover", "--json")
    assert own.returncode == 0, own.stdout + own.stderr
    [outcome] = json.loads(own.stdout)["outcomes"]
    assert (outcome["call_id"], outcome["now"]) == (call_id, "committed")
    assert _calls(served.server) == [call_id] and _calls(other_server) == []


def test_one_patch_sent_to_two_repositories_is_a_call_in_each(
    served: Served, git_daemon: Any, pg_url: str, tmp_path: Path
) -> None:
    other, other_server = _another_repository(git_daemon, tmp_path)
    receipts = []
    for clone in (served.clone, other):
        done = _fleet(clone, pg_url, "apply", "-", "--json")
        assert done.returncode == 0, done.stdout + done.stderr
        receipts.append(json.loads(done.stdout))
    assert receipts[0]["call_id"] == receipts[1]["call_id"]
    assert receipts[1]["replayed"] is False
    assert _calls(served.server) == _calls(other_server) == [receipts[0]["call_id"]]
    for clone in (served.clone, other):
        audited = _fleet(clone, pg_url, "audit")
        assert audited.returncode == 0, audited.stdout + audited.stderr
        logged = _fleet(clone, pg_url, "log", "--json")
        assert logged.returncode == 0 and logged.stdout.count(receipts[0]["call_id"]) >= 1


def test_a_state_directory_given_to_two_repositories_serves_the_first_only(
    repo: Repo, tmp_path: Path
) -> None:
    """The SQLite ledger of a --state-dir records the repository that made it (by its Git
    directory): another repository given the same directory is refused, one line, exit 2,
    nothing written; it would otherwise settle the first one's calls against its own branch."""
    state = str(tmp_path / "state")
    first = run_cli("apply", "-", "--repo", str(repo.path), "--state-dir", state, input=UTIL_PATCH)
    assert first.returncode == 0, first.stderr
    other = make_repo(tmp_path / "other", {"src/util.py": "VALUE = 1\n"})
    head, files = other.head(), other.files()
    receipts = sorted((tmp_path / "state" / "receipts").iterdir())
    for command in (["apply", "-"], ["recover"]):
        run = run_cli(*command, "--repo", str(other.path), "--state-dir", state, input=UTIL_PATCH)
        assert run.returncode == 2, run.stdout + run.stderr
        [line] = run.stderr.strip().splitlines()
        assert line.startswith("error: the ledger ") and "serves another repository" in line
        assert "Traceback" not in run.stderr
        assert (other.head(), other.files()) == (head, files)
        assert sorted((tmp_path / "state" / "receipts").iterdir()) == receipts
    again = run_cli("recover", "--repo", str(repo.path), "--state-dir", state)
    assert again.returncode == 0, again.stdout + again.stderr
