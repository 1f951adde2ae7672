"""A ledger knows which repository it serves (recorded on first use). Two repositories sharing
one PostgreSQL database stay independent — each its own calls, its own claims, even of the same
patch — and a SQLite ledger two repositories were given (one ``--state-dir``) refuses the second.
"""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from applyonce.core.identity import CallIdentity
from applyonce.state.ledger import OtherRepositoryError, Owner
from applyonce.state.postgres.ledger import PostgresLedger, own_schema
from applyonce.state.sqlite.ledger import SqliteLedger

REF = "refs/heads/main"
SAME = CallIdentity.compute("a" * 64)  # one patch, sent to two repositories
ME = Owner.me()
FIRST, SECOND = "remote:" + "1" * 40, "remote:" + "2" * 40


def test_two_repositories_in_one_database_are_independent(pg_url: str) -> None:
    first = PostgresLedger(pg_url, repository=lambda: FIRST)
    second = PostgresLedger(pg_url, repository=lambda: SECOND)
    try:
        assert first.schema == "public" and second.schema == own_schema(SECOND)
        # The same call in each: each repository runs it once, neither sees the other's.
        assert first.claim(SAME, ref=REF, owner=ME).outcome == "run"
        assert second.claim(SAME, ref=REF, owner=ME).outcome == "run"
        other = CallIdentity.compute("b" * 64)
        first.claim(other, ref=REF, owner=ME)
        assert [r.call_id for r in first.calls()] == [SAME.call_id, other.call_id]
        assert [r.call_id for r in second.calls()] == [SAME.call_id]
        assert len(second.events(SAME.call_id)) == 1
    finally:
        first.close()
        second.close()
    # Opened again, from any clone of either: each finds its own.
    again = PostgresLedger(pg_url, repository=lambda: SECOND)
    try:
        assert [r.call_id for r in again.calls()] == [SAME.call_id]
    finally:
        again.close()
    with psycopg.connect(pg_url) as conn:
        recorded = conn.execute("SELECT id FROM public.repository").fetchall()
        assert recorded == [(FIRST,)]
        schema = own_schema(SECOND)
        assert conn.execute(f'SELECT id FROM "{schema}".repository').fetchall() == [(SECOND,)]


def test_the_tables_of_an_older_version_go_to_the_first_repository_that_opens_them(
    pg_url: str,
) -> None:
    legacy = PostgresLedger(pg_url)  # before ledgers knew their repository
    legacy.claim(SAME, ref=REF, owner=ME)
    legacy.close()
    second = PostgresLedger(pg_url, repository=lambda: SECOND)
    first = PostgresLedger(pg_url, repository=lambda: FIRST)
    try:
        assert [r.call_id for r in second.calls()] == [SAME.call_id]  # adopted: it came first
        assert first.calls() == [] and first.schema == own_schema(FIRST)
    finally:
        first.close()
        second.close()


def test_a_sqlite_ledger_given_to_another_repository_refuses_it(tmp_path: Path) -> None:
    path = tmp_path / "state" / "ledger.sqlite3"
    first = SqliteLedger(path, repository=FIRST)
    first.claim(SAME, ref=REF, owner=ME)
    first.close()
    with pytest.raises(OtherRepositoryError) as refused:
        SqliteLedger(path, repository=SECOND)
    assert refused.value.exit_code == 2
    assert FIRST in refused.value.message and "--state-dir" in refused.value.hint
    again = SqliteLedger(path, repository=FIRST)
    try:
        assert [r.call_id for r in again.calls()] == [SAME.call_id]
    finally:
        again.close()
