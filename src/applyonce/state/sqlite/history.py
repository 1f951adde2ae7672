"""The Call-Id history index's cache in SQLite: ``<state>/call-index.sqlite3``.

A :class:`applyonce.git.history.HistoryCache`. It is a cache of Git: deleting the file loses
nothing (the next call scans the branch once), so it is written with ``synchronous=NORMAL``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from applyonce.state.ledger import LedgerError
from applyonce.state.sqlite.connection import Database

T = TypeVar("T")

MIGRATIONS = [
    (
        "0001_call_index",
        """
        CREATE TABLE found (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            ref TEXT NOT NULL,
            call_id TEXT NOT NULL,
            commit_id TEXT NOT NULL,
            UNIQUE (ref, call_id, commit_id)
        );
        CREATE INDEX found_by_call ON found (ref, call_id);
        CREATE TABLE scanned (ref TEXT PRIMARY KEY, tip TEXT NOT NULL);
        """,
    ),
    # Trailers are read as git log reads them, no longer as libgit2 does (a Call-Id after a
    # "---" line counts): what was scanned the old way is scanned again.
    ("0002_trailers_as_git_reads_them", "DELETE FROM found; DELETE FROM scanned"),
]


class SqliteHistoryCache:
    """A cache that heals itself: a file found broken while in use is removed and started afresh
    (the next refresh scans the branch once), never an error of the call that asked."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.database = Database(path, MIGRATIONS, synchronous="NORMAL")
        self.db = self.database.db

    def close(self) -> None:
        self.database.close()

    def _heal(self) -> None:
        self.database.close()
        for stale in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm")):
            stale.unlink(missing_ok=True)
        self.database = Database(self.path, MIGRATIONS, synchronous="NORMAL")
        self.db = self.database.db

    def _healing(self, read: Callable[[], T]) -> T:
        try:
            return read()
        except (sqlite3.DatabaseError, LedgerError):
            self._heal()
            return read()

    def scanned_tip(self, ref: str) -> str | None:
        def read() -> str | None:
            row = self.db.execute("SELECT tip FROM scanned WHERE ref = ?", (ref,)).fetchone()
            return None if row is None else str(row[0])

        return self._healing(read)

    def add(self, ref: str, found: list[tuple[str, str]], tip: str) -> None:
        self._healing(lambda: self._add(ref, found, tip))

    def _add(self, ref: str, found: list[tuple[str, str]], tip: str) -> None:
        with self.database.transaction() as db:
            # Oldest first, so a higher seq is a newer commit.
            db.executemany(
                "INSERT OR IGNORE INTO found (ref, call_id, commit_id) VALUES (?, ?, ?)",
                [(ref, call, commit) for call, commit in reversed(found)],
            )
            db.execute("INSERT OR REPLACE INTO scanned (ref, tip) VALUES (?, ?)", (ref, tip))

    def commits(self, ref: str, call_id: str) -> list[str]:
        def read() -> list[str]:
            rows = self.db.execute(
                "SELECT commit_id FROM found WHERE ref = ? AND call_id = ? ORDER BY seq DESC",
                (ref, call_id),
            )
            return [str(r[0]) for r in rows]

        return self._healing(read)

    def calls(self, ref: str) -> dict[str, list[str]]:
        def read() -> dict[str, list[str]]:
            found: dict[str, list[str]] = {}
            rows = self.db.execute(
                "SELECT call_id, commit_id FROM found WHERE ref = ? ORDER BY seq DESC", (ref,)
            )
            for call_id, commit_id in rows:
                found.setdefault(str(call_id), []).append(str(commit_id))
            return found

        return self._healing(read)
