"""A repeated call is settled from Git, never applied twice, when its record is gone, odd, or was
left half-written by an exception in this very process."""

from __future__ import annotations

import shutil

import orjson
import pytest

from applyonce import Executor
from tests.conftest import NEW_FILE_PATCH as ADD
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply


def test_lost_state_dir_does_not_let_a_call_land_twice(repo: Repo) -> None:
    assert apply(repo, ADD).returncode == 0
    shutil.rmtree(repo.state_dir())
    assert apply(repo, PATCH).returncode == 0  # a new ledger is created by another call first
    again = apply(repo, ADD, "--json")
    assert again.returncode == 0
    receipt = orjson.loads(again.stdout)
    assert receipt["reconciled"] is True
    assert receipt["output"] == "Success. Updated the following files:\nA new.txt\n"
    ids = repo.call_ids()
    assert len(ids) == len(set(ids)) == 2


def test_an_odd_ledger_state_never_makes_a_second_commit(repo: Repo) -> None:
    import sqlite3

    assert apply(repo, ADD).returncode == 0
    for state, retryable in (("bogus", 0), ("rejected", 1), ("prepared", 0)):
        db = sqlite3.connect(repo.state_dir() / "ledger.sqlite3")
        db.execute(
            "UPDATE calls SET state = ?, retryable = ?, owner_pid = NULL", (state, retryable)
        )
        db.commit()
        db.close()
        again = apply(repo, ADD)
        assert again.returncode == 0, (state, again.stderr)
        assert len(repo.call_ids()) == 1, state


def test_a_call_that_failed_halfway_in_this_process_can_be_repeated_here(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception (not a crash) after the publish leaves the call claimed by this live process;
    repeating it here must settle it through Git, not report it as running, nor apply it twice."""
    import applyonce.flow.call.apply as apply_module

    executor = Executor(repo.path)
    original = apply_module.fault

    def explode(point: str) -> None:
        if point == "after-publish":
            raise OSError("disk full while writing the receipt")
        original(point)

    monkeypatch.setattr(apply_module, "fault", explode)
    with pytest.raises(OSError):
        executor.apply(PATCH)
    monkeypatch.setattr(apply_module, "fault", original)
    receipt = executor.apply(PATCH)
    assert receipt.status == "committed" and receipt.reconciled
    assert repo.commit_count() == 2
