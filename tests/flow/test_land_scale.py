"""``applyonce land`` of a long-lived lane reads its rows in a few queries: a lane call stays a
pending commit of the lane after it landed (its landing is a commit of its own), so each
``land`` meets every call the lane ever made again; it must not ask the ledger once for each."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from applyonce import CallOptions, Executor
from applyonce.state.sqlite.ledger import SqliteLedger
from tests.conftest import make_repo


def _reads_of_a_land_after(
    root: Path, landed_before: int, monkeypatch: pytest.MonkeyPatch
) -> Counter[str]:
    """The ledger's row reads of a ``land`` of two new lane calls, after ``landed_before``."""
    repo = make_repo(root, {"README.md": "x\n"})
    executor = Executor(repo.path)
    try:
        lane = executor.open_lane("a")

        def call(i: int) -> None:
            patch = f"*** Begin Patch\n*** Add File: f{i}.txt\n+{i}\n*** End Patch\n"
            assert executor.apply(patch, CallOptions(branch=lane)).status == "committed"

        for i in range(landed_before):
            call(i)
        assert len(executor.land().landed) == landed_before
        call(landed_before)
        call(landed_before + 1)
        counts: Counter[str] = Counter()
        get, get_many = SqliteLedger.get, SqliteLedger.get_many

        def counting_get(self: SqliteLedger, call_id: str) -> Any:
            counts["get"] += 1
            return get(self, call_id)

        def counting_get_many(self: SqliteLedger, call_ids: Iterable[str]) -> Any:
            counts["get_many"] += 1
            return get_many(self, call_ids)

        with monkeypatch.context() as patched:
            patched.setattr(SqliteLedger, "get", counting_get)
            patched.setattr(SqliteLedger, "get_many", counting_get_many)
            report = executor.land()
        assert (len(report.landed), report.already) == (2, landed_before)
        return counts
    finally:
        executor.close()


def test_a_land_reads_as_many_rows_after_twenty_landed_calls_as_after_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    few = _reads_of_a_land_after(tmp_path / "few", 2, monkeypatch)
    many = _reads_of_a_land_after(tmp_path / "many", 20, monkeypatch)
    assert many == few, (few, many)
