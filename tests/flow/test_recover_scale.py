"""``applyonce recover`` of many calls is one pass: its walks of history, its ancestry tests and
its ledger transactions do not grow with the number of interrupted calls (issue 13, item 5).

The interrupted calls are made in this process, the fault point raising instead of killing (the
state a SIGKILL leaves once the claim is handed to a dead process: tests/e2e/crash/test_recovery.py
does it with real SIGKILLs); what is counted is recover's own work.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import applyonce.flow.call.apply as apply_module
import applyonce.flow.record.settle as settle_module
from applyonce import Executor
from applyonce.git.store import GitStore
from applyonce.state.sqlite.connection import Database
from applyonce.state.sqlite.ledger import SqliteLedger
from tests.conftest import Repo, make_repo

KINDS = ("after-publish", "after-commit-object", "after-prepared")


class Crash(BaseException):
    pass


def interrupted_calls(root: Path, n: int, monkeypatch: pytest.MonkeyPatch) -> Repo:
    """A repo with ``n`` interrupted calls, a third each after the publish, after the commit
    object and after 'prepared', their claims held by a dead process."""
    repo = make_repo(root, {"README.md": "x\n"})
    armed = {"point": ""}

    def fault(point: str) -> None:
        if point == armed["point"]:
            raise Crash(point)

    with monkeypatch.context() as patched:
        patched.setattr(apply_module, "fault", fault)
        patched.setattr(settle_module, "fault", fault)
        executor = Executor(repo.path)
        for i in range(n):
            armed["point"] = KINDS[i % 3]
            with pytest.raises(Crash):
                executor.apply(f"*** Begin Patch\n*** Add File: c{i}.txt\n+{i}\n*** End Patch\n")
        executor.close()
    db = sqlite3.connect(repo.state_dir() / "ledger.sqlite3")
    db.execute("UPDATE calls SET owner_pid = 4194000, owner_start = '1'")
    db.commit()
    db.close()
    return repo


def counted_recover(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> tuple[Counter[str], Counter[str]]:
    """Recover ``repo`` in this process; returns the outcomes and what was counted: history
    walks (GitStore.commits), ancestry tests (GitStore.is_ancestor), ledger transactions and
    ledger queries for rows by call ID (one call's, or a batch's)."""
    counts: Counter[str] = Counter()
    commits, is_ancestor, transaction = GitStore.commits, GitStore.is_ancestor, Database.transaction
    find, find_many = SqliteLedger._find, SqliteLedger._find_many

    def counting_find(self: SqliteLedger, db: Any, call_id: str) -> Any:
        counts["row queries"] += 1
        return find(self, db, call_id)

    def counting_find_many(self: SqliteLedger, db: Any, call_ids: list[str]) -> Any:
        counts["row queries"] += 1
        return find_many(self, db, call_ids)

    def counting_commits(self: GitStore, tip: str | None, **kw: Any) -> Iterator[Any]:
        counts["walks"] += 1
        if kw.get("hide") is None:
            counts["walks of the whole branch"] += 1
        return commits(self, tip, **kw)

    def counting_is_ancestor(self: GitStore, ancestor: str, descendant: str) -> bool:
        counts["ancestry tests"] += 1
        return is_ancestor(self, ancestor, descendant)

    def counting_transaction(self: Database, **kw: Any) -> Any:
        if self.path.name == "ledger.sqlite3":
            counts["ledger transactions"] += 1
        return transaction(self, **kw)

    with monkeypatch.context() as patched:
        patched.setattr(GitStore, "commits", counting_commits)
        patched.setattr(GitStore, "is_ancestor", counting_is_ancestor)
        patched.setattr(Database, "transaction", counting_transaction)
        patched.setattr(SqliteLedger, "_find", counting_find)
        patched.setattr(SqliteLedger, "_find_many", counting_find_many)
        executor = Executor(repo.path)
        report = executor.recover()
        executor.close()
    return Counter(o.now for o in report.outcomes), counts


def test_recover_of_many_calls_walks_and_records_as_often_as_for_few(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    few = interrupted_calls(tmp_path / "few", 3, monkeypatch)
    many = interrupted_calls(tmp_path / "many", 30, monkeypatch)
    few_outcomes, few_counts = counted_recover(few, monkeypatch)
    many_outcomes, many_counts = counted_recover(many, monkeypatch)
    assert few_outcomes == Counter(committed=2, rejected=1)  # the last staged one rolls forward
    assert many_outcomes == Counter(committed=11, rejected=19)
    # As many walks for 30 calls as for 3, and no ancestry test per call: one walk of the
    # whole branch settles the calls and lists its commits for the repair of records (the
    # checkout sync may walk it once more; the Call-Id cache reads only what it has not seen).
    assert many_counts == few_counts, (few_counts, many_counts)
    assert many_counts["ancestry tests"] == 0
    assert many_counts["walks of the whole branch"] <= 2, many_counts
    # Taken over in one transaction, their events recorded in one (and the sync's one).
    assert many_counts["ledger transactions"] <= 4, many_counts
    # Their rows read by one query for the batch, not one query per call.
    assert many_counts["row queries"] == few_counts["row queries"] == 1, (
        few_counts,
        many_counts,
    )
