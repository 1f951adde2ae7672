"""Helpers of the claim and lease tests: a call of the three-file patch, under another host ID, and
what the SQLite ledger holds of it."""

from __future__ import annotations

import sqlite3

from tests.conftest import Repo, Run, run_cli
from tests.e2e.support import THREE_FILE_PATCH as PATCH

OTHER_HOST = {"APPLYONCE_HOST_ID": "build-host-2.example.invalid"}


def apply(repo: Repo, *args: str, env: dict[str, str] | None = None) -> Run:
    return run_cli("apply", "-", "--repo", str(repo.path), "--json", *args, input=PATCH, env=env)


def ledger_rows(repo: Repo) -> list[dict[str, object]]:
    db = sqlite3.connect(repo.state_dir() / "ledger.sqlite3")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM calls")]
    finally:
        db.close()


def ledger_events(repo: Repo, call_id: str) -> list[str]:
    db = sqlite3.connect(repo.state_dir() / "ledger.sqlite3")
    try:
        return [k for (k,) in db.execute("SELECT kind FROM events WHERE call_id = ?", (call_id,))]
    finally:
        db.close()
