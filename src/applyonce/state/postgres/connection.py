"""Connecting to the PostgreSQL ledger: bounded waits, one-line errors, named migrations.

The URL is passed to psycopg as given (``postgresql://user@/db?host=/run/pg`` and every other
libpq form); applyonce only adds what the URL does not say. No wait is unbounded, so a call never
hangs on a database that is down or wedged:

* ``connect_timeout`` (default 5 s; libpq's own minimum is 2 s): a server that does not answer.
* ``lock_timeout`` 5 s: a row lock is held for the milliseconds of one transaction; waiting longer
  means its holder is stuck (as SQLite's busy timeout: "busy", exit 4, retry).
* ``statement_timeout`` 30 s: applyonce's statements touch a few rows by key, or read the ledger
  once (``log``, ``audit``); 30 s is far above either and still ends a wedged server's wait.
* ``idle_in_transaction_session_timeout`` 30 s: a client stopped (SIGSTOP, a frozen VM) inside a
  transaction loses it, and its row locks, instead of blocking every other client.
* TCP keepalives and ``tcp_user_timeout``: a server host that vanished without a reset is noticed
  in seconds, not after the kernel's two hours.

A setting the URL's ``options`` already names is left as it says. Errors never name the password:
messages describe the server by its host or socket, database and user only, and the driver's own
words pass through :func:`applyonce.core.redaction.redact_secrets`. An option libpq refuses
(an unknown key, ``sslmode=bogus``, a port that is no number) is the connection string's fault,
not a database that is down: :class:`InvalidLedgerUrlError`, exit 2, never "retry".
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict

from applyonce.core.redaction import redact_secrets
from applyonce.errors import ApplyOnceError, UsageError
from applyonce.state.ledger import LedgerBusyError, LedgerError, pending_migrations
from applyonce.state.storage import LedgerUnavailableError

Migrations = Sequence[tuple[str, str]]

DEFAULT_CONNECT_TIMEOUT_S = 5.0
LOCK_TIMEOUT_S = 5.0
STATEMENT_TIMEOUT_S = 30.0
IDLE_IN_TRANSACTION_S = 30.0
# Only on TCP connections (libpq ignores them on a Unix socket).
_TCP_DEFAULTS = {
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",  # ms
}
# One key for every applyonce ledger: advisory locks are per database already.
MIGRATION_LOCK = 0x6170_706C_796F_6E63  # "applyonc"


class InvalidLedgerUrlError(UsageError):
    kind = "invalid-ledger-url"
    default_hint = (
        "pass --ledger (or git config applyonce.ledger) a libpq URL such as"
        " postgresql://user@host/db or postgresql://user@/db?host=/run/postgresql, or libpq"
        " key=value words (host=/run/postgresql dbname=db)"
    )


def parse_url(url: str, connect_timeout: float) -> dict[str, Any]:
    """The connection parameters of ``url``, with applyonce's defaults where it says nothing.

    Raises:
        InvalidLedgerUrlError: libpq cannot read it (said without repeating it: it may hold a
            password).
    """
    try:
        params: dict[str, Any] = dict(conninfo_to_dict(url))
    except psycopg.Error as exc:
        # libpq's words name the option, never the value ("invalid connection option
        # "bogus""); a quoting error is said without quoting (it may be inside the password).
        detail = _first_line(exc, None)
        named = detail.startswith(("invalid connection option", "invalid URI query parameter"))
        reason = f": {detail}" if named else ""
        raise InvalidLedgerUrlError(
            f"the ledger URL is not a valid PostgreSQL connection string{reason}"
        ) from None
    if "connect_timeout" not in params and "PGCONNECT_TIMEOUT" not in os.environ:
        params["connect_timeout"] = str(max(1, round(connect_timeout)))
    for key, value in _TCP_DEFAULTS.items():
        params.setdefault(key, value)
    params.setdefault("application_name", "applyonce")
    return params


def describe(params: dict[str, Any]) -> str:
    """The server and database of ``params`` as the user can recognise them: host (or socket
    folder), port, database and user; never the password."""
    host = str(params.get("host") or os.environ.get("PGHOST") or "the default socket")
    port = params.get("port") or os.environ.get("PGPORT")
    user = params.get("user") or os.environ.get("PGUSER")
    dbname = params.get("dbname") or os.environ.get("PGDATABASE") or user or "(default)"
    where = host if host.startswith("/") or not port else f"{host}:{port}"
    return f"database {dbname!r} on {where}" + (f" as {user!r}" if user else "")


def _first_line(exc: BaseException, secret: str | None) -> str:
    """The first line of a driver error, without the password should it ever appear in it."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0].strip()
    if secret:
        text = text.replace(secret, "***")
    text = redact_secrets(text)
    return text.removeprefix("connection failed: ").removeprefix("connection is bad: ")


# What libpq says of an option it refuses before it connects anywhere (fe-connect.c): the
# connection string's fault, which no retry mends.
_REFUSED_OPTION = re.compile(
    r"^(invalid [\w ]+ value|invalid connection option|invalid port number"
    r"|invalid SSL protocol version range|could not match \d+ |could not parse network address"
    r"|[\w]+ value \S+ invalid when|(negative |invalid )?require_auth)"
)


def connect(params: dict[str, Any], where: str) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection in autocommit mode (transactions are explicit) with the session timeouts.

    Raises:
        LedgerUnavailableError: the server cannot be reached (or refuses us).
    """
    try:
        conn = psycopg.connect(**params, autocommit=True)
    except psycopg.ProgrammingError as exc:
        # libpq refused an option of the URL ("bad value for connect_timeout"): the URL's
        # fault, not a server that is down; repeating the call would not help.
        raise InvalidLedgerUrlError(
            f"the ledger URL cannot be used: {_first_line(exc, params.get('password'))}"
        ) from None
    except psycopg.Error as exc:
        detail = _first_line(exc, params.get("password"))
        if _REFUSED_OPTION.match(detail):
            raise InvalidLedgerUrlError(f"the ledger URL cannot be used: {detail}") from None
        raise LedgerUnavailableError(
            f"cannot reach the ledger {where}: {detail}", ledger=where
        ) from None
    options = str(params.get("options", ""))
    settings = {
        "lock_timeout": f"{int(LOCK_TIMEOUT_S * 1000)}ms",
        "statement_timeout": f"{int(STATEMENT_TIMEOUT_S * 1000)}ms",
        "idle_in_transaction_session_timeout": f"{int(IDLE_IN_TRANSACTION_S * 1000)}ms",
    }
    chosen = {name: value for name, value in settings.items() if name not in options}
    with errors_of(conn, where, params.get("password")):
        if conn.execute("SHOW synchronous_commit").fetchone() == ("off",):
            # Off for this role or server: a commit that returned could still be lost, and the
            # ledger promises it is not. Local durability at least (a stronger mode is kept).
            chosen["synchronous_commit"] = "on"
        if chosen:
            calls = ", ".join("set_config(%s, %s, false)" for _ in chosen)
            conn.execute(f"SELECT {calls}", [x for item in chosen.items() for x in item])
    return conn


@contextlib.contextmanager
def errors_of(
    conn: psycopg.Connection[Any] | None, where: str, secret: str | None = None
) -> Iterator[None]:
    """The driver's errors as applyonce's one-line ones: a lost connection or a server that
    stopped answering (unavailable), a lock or deadlock (busy), anything else (unreadable)."""
    try:
        yield
    except ApplyOnceError:
        raise
    except psycopg.Error as exc:
        raise error_of(exc, conn, where, secret) from None


def error_of(
    exc: psycopg.Error, conn: psycopg.Connection[Any] | None, where: str, secret: str | None
) -> ApplyOnceError:
    """The applyonce error for the driver error ``exc`` on ``conn``."""
    detail = _first_line(exc, secret)
    if isinstance(exc, pg_errors.LockNotAvailable | pg_errors.DeadlockDetected):
        return LedgerBusyError(
            f"the ledger {where} is busy ({detail}; waited {LOCK_TIMEOUT_S:g} s)",
            hint="another applyonce process holds this call's row; retry in a moment, or stop"
            " that process if it is stuck",
        )
    if isinstance(exc, pg_errors.SerializationFailure):
        return LedgerBusyError(f"the ledger {where} is busy ({detail})")
    if isinstance(exc, pg_errors.QueryCanceled):
        return LedgerUnavailableError(
            f"the ledger {where} did not answer within {STATEMENT_TIMEOUT_S:g} s ({detail})",
            ledger=where,
        )
    if conn is None or conn.broken or conn.closed or isinstance(exc, psycopg.InterfaceError):
        return LedgerUnavailableError(
            f"lost the connection to the ledger {where} ({detail})", ledger=where
        )
    if isinstance(exc, psycopg.OperationalError):  # the server's trouble: a full disk, a shutdown
        return LedgerUnavailableError(f"the ledger {where} failed ({detail})", ledger=where)
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return LedgerError(
            f"the ledger {where} refused access ({detail})",
            hint="grant the ledger's user the right to create and write tables in that"
            " database, then repeat the call",
        )
    return LedgerError(
        f"the ledger {where} could not be read or written ({detail})",
        hint="check the database (a dropped or altered table?), then repeat the call",
    )


def use_schema(conn: psycopg.Connection[Any], schema: str, where: str) -> None:
    """Make ``schema`` where this connection's statements find and create their tables."""
    with errors_of(conn, where):
        conn.execute("SELECT set_config('search_path', %s, false)", (schema,))


def migrate(
    conn: psycopg.Connection[Any], migrations: Migrations, where: str, *, schema: str = "public"
) -> None:
    """Apply the named migrations not applied yet to ``schema`` (created if need be; the
    connection's search path must name it), once, whoever opens it first.

    The usual case (all applied) is one read. Otherwise one transaction under a transaction-scoped
    advisory lock: concurrent first openers wait for each other (a ``CREATE TABLE IF NOT EXISTS``
    racing another fails on PostgreSQL's catalog), then see what the first applied.
    """
    with errors_of(conn, where):
        try:
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
        except pg_errors.UndefinedTable:
            done = set()
        if {name for name, _ in migrations} <= done:
            return
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            if schema != "public":
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            conn.execute(
                "CREATE TABLE IF NOT EXISTS migrations"
                " (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT name FROM migrations")}
            for name, statements in pending_migrations(migrations, done):
                for statement in statements:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO migrations (name, applied_at) VALUES (%s,"
                    " to_char(clock_timestamp() AT TIME ZONE 'UTC',"
                    ' \'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"\'))',
                    (name,),
                )
