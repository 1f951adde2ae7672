"""The PostgreSQL ledger's schema: the SQLite ledger's tables, columns and named migrations in
PostgreSQL's dialect (a version reading either finds the same names), then its own.

They live in the database's ``public`` schema for the first repository that uses the database,
and in a schema of their own for each other one (:mod:`applyonce.state.postgres.ledger`).

Dialect differences: ``seq`` is an identity column; ``calls`` has an explicit ``rowid`` (SQLite's
is implicit) that orders calls created in the same millisecond; ``lease_seconds`` is a double
(SQLite's REAL); times stay ISO 8601 text, as SQLite's, written from the server's clock.
"""

from __future__ import annotations

from applyonce.state.ledger import REPOSITORY_MIGRATION

MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_events_and_calls",
        """
        CREATE TABLE events (
            seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            call_id TEXT NOT NULL,
            execution_id TEXT,
            kind TEXT NOT NULL,
            at TEXT NOT NULL,
            data TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX events_by_call ON events (call_id, seq);
        CREATE TABLE calls (
            call_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            execution_id TEXT,
            args_sha256 TEXT NOT NULL,
            idempotency_key TEXT,
            ref TEXT NOT NULL,
            base_commit TEXT,
            commit_id TEXT,
            exit_code INTEGER,
            retryable INTEGER NOT NULL DEFAULT 0,
            receipt_sha256 TEXT,
            synced INTEGER NOT NULL DEFAULT 0,
            owner_pid INTEGER,
            owner_host TEXT,
            owner_start TEXT,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL,
            rowid BIGINT GENERATED ALWAYS AS IDENTITY
        );
        CREATE INDEX calls_by_state ON calls (state)
        """,
    ),
    (
        # Unused, as in SQLite (the history index is a cache file of each clone): kept so that
        # both ledgers record the same migrations.
        "0002_trailer_index",
        """
        CREATE TABLE trailer_index (
            ref TEXT NOT NULL,
            call_id TEXT NOT NULL,
            commit_id TEXT NOT NULL,
            PRIMARY KEY (ref, call_id, commit_id)
        );
        CREATE TABLE scanned (ref TEXT PRIMARY KEY, tip TEXT NOT NULL)
        """,
    ),
    (
        "0003_claim_leases",
        """
        ALTER TABLE calls ADD COLUMN lease_expires_at TEXT;
        ALTER TABLE calls ADD COLUMN lease_seconds DOUBLE PRECISION
        """,
    ),
    (
        "0004_owner_namespace",
        """
        ALTER TABLE calls ADD COLUMN owner_pidns TEXT;
        ALTER TABLE calls ADD COLUMN owner_boot TEXT
        """,
    ),
    (
        "0005_unsynced_calls",
        """
        CREATE INDEX calls_unsynced ON calls (ref, updated_at)
            WHERE state = 'committed' AND synced = 0
        """,
    ),
    (
        # With a shared ledger the receipts live in it too (the files under <state>/receipts are
        # a cache): every clone can show every clone's calls.
        "0006_receipts",
        """
        CREATE TABLE receipts (
            call_id TEXT PRIMARY KEY,
            sha256 TEXT NOT NULL,
            body BYTEA NOT NULL,
            updated_at TEXT NOT NULL
        )
        """,
    ),
    REPOSITORY_MIGRATION,
]
