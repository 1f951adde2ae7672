"""Recover repairs the record from Git: receipts that are missing or do not verify are rebuilt,
a lost state dir or ledger is re-recorded, two commits with one Call-Id are recorded as unknown,
and a killed run's temp receipt is removed."""

from __future__ import annotations

import signal

import orjson
import pytest

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, run_cli
from tests.e2e.crash.records import SECOND, apply, audit

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")


def test_recover_says_when_it_had_to_search_the_whole_branch(repo: Repo) -> None:
    crashed = run_cli(
        "apply", "-", "--repo", str(repo.path), input=PATCH, env={"APPLYONCE_FAULT": "after-claim"}
    )
    assert crashed.returncode == -signal.SIGKILL
    result = run_cli("recover", "--repo", str(repo.path))
    assert result.returncode == 0
    assert (
        "note: refs/heads/main: a call has no known base on the branch; searched its whole history"
        in result.stdout
    )
    assert "interrupted before the publish" in result.stdout


def test_recover_rebuilds_a_deleted_receipt_from_the_commit(repo: Repo) -> None:
    original = apply(repo)
    (repo.state_dir() / "receipts" / f"{original['call_id']}.json").unlink()
    result = run_cli("recover", "--repo", str(repo.path))
    assert "its receipt was missing; rebuilt it from commit" in result.stdout
    assert audit(repo)[0] == 0
    again = apply(repo)
    for key in ("call_id", "commit", "files", "output", "match_levels"):
        assert again[key] == original[key], key


def test_recover_rebuilds_a_tampered_receipt_so_forged_data_never_returns(repo: Repo) -> None:
    original = apply(repo)
    path = repo.state_dir() / "receipts" / f"{original['call_id']}.json"
    forged = dict(original, files=[dict(f, sha256="0" * 64) for f in original["files"]])
    path.write_bytes(orjson.dumps(forged))
    result = run_cli("recover", "--repo", str(repo.path))
    assert "its receipt did not verify; rebuilt it from commit" in result.stdout
    again = apply(repo)
    assert again["files"] == original["files"]
    assert audit(repo)[0] == 0


def test_recover_rebuilds_the_record_of_a_lost_state_dir(repo: Repo) -> None:
    import shutil

    one = apply(repo)
    two = apply(repo, SECOND)
    shutil.rmtree(repo.state_dir())
    result = run_cli("recover", "--repo", str(repo.path))
    assert result.stdout.count("it had no record at all; rebuilt it from commit") == 2
    # Honest about what it could not check: no record kept the calls' arguments.
    assert result.stdout.count("could not be checked against the call's arguments") == 2
    assert audit(repo)[0] == 0
    logged = orjson.loads(run_cli("log", "--repo", str(repo.path), "--json").stdout)
    assert {row["call_id"] for row in logged} == {one["call_id"], two["call_id"]}
    assert apply(repo)["commit"] == one["commit"]


def test_recover_settles_a_prepared_receipt_whose_ledger_was_lost(repo: Repo) -> None:
    crashed = run_cli(
        "apply",
        "-",
        "--repo",
        str(repo.path),
        input=PATCH,
        env={"APPLYONCE_FAULT": "after-publish"},
    )
    assert crashed.returncode == -signal.SIGKILL
    (repo.state_dir() / "ledger.sqlite3").unlink()
    for leftover in repo.state_dir().glob("ledger.sqlite3-*"):
        leftover.unlink()
    result = run_cli("recover", "--repo", str(repo.path))
    assert result.returncode == 0
    assert "prepared   committed" in result.stdout
    assert audit(repo)[0] == 0
    assert len(repo.call_ids()) == 1


def test_recover_restores_ledger_rows_from_receipts_after_the_ledger_was_moved_aside(
    repo: Repo,
) -> None:
    one = apply(repo)
    rejected = run_cli(
        "apply", "-", "--repo", str(repo.path), input=PATCH.replace("VALUE = 1", "VALUE = 9")
    )
    assert rejected.returncode == 1
    ledger = repo.state_dir() / "ledger.sqlite3"
    ledger.rename(repo.state_dir() / "ledger.broken")
    for leftover in repo.state_dir().glob("ledger.sqlite3-*"):
        leftover.unlink()
    result = run_cli("recover", "--repo", str(repo.path))
    assert result.stdout.count("ledger row restored from its receipt") == 2
    assert run_cli("replay", "--repo", str(repo.path)).returncode == 0
    logged = orjson.loads(run_cli("log", "--repo", str(repo.path), "--json").stdout)
    assert sorted(row["state"] for row in logged) == ["committed", "rejected"]
    assert apply(repo)["commit"] == one["commit"]


def test_recover_records_a_call_with_two_commits_and_no_record_as_unknown(repo: Repo) -> None:
    import shutil

    receipt = apply(repo)
    repo.git("revert", "--no-edit", "HEAD")
    repo.git("cherry-pick", receipt["commit"])
    shutil.rmtree(repo.state_dir())
    result = run_cli("recover", "--repo", str(repo.path))
    assert result.returncode == 5
    picked, call = repo.head()[:12], receipt["call_id"][:12]
    assert (
        f"2 commits carry this Call-Id; decide which commit is the call's ({picked} or "
        f"{receipt['commit'][:12]}; 'applyonce audit' counts one a later commit undid), then "
        f"run 'applyonce resolve {call} --as committed --commit COMMIT --note TEXT'"
    ) in result.stdout
    shown = run_cli("show", receipt["call_id"], "--repo", str(repo.path))
    assert shown.returncode == 0 and "status    unknown" in shown.stdout


def test_a_retry_removes_the_temp_receipt_its_killed_run_left(repo: Repo) -> None:
    crashed = run_cli(
        "apply",
        "-",
        "--repo",
        str(repo.path),
        input=PATCH,
        env={"APPLYONCE_FAULT": "after-receipt-tmp"},
    )
    assert crashed.returncode == -signal.SIGKILL
    assert list((repo.state_dir() / "receipts").glob(".applyonce-tmp-*"))
    assert apply(repo)["status"] == "committed"
    assert list((repo.state_dir() / "receipts").glob(".applyonce-tmp-*")) == []
