"""The context every use case runs in: one repository, its state directory, and the seams.

:func:`open_context` wires the implementations: the repository (:class:`GitStore`), its publisher
(:class:`LocalRefPublisher`, or the remote's with ``--remote NAME``), the ledger
(:class:`SqliteLedger`, or PostgreSQL's with ``--ledger postgresql://…``; opened on first use), the
receipts directory, and the Call-Id history cache.

Where a fleet of clones shares its record and its commit point (:class:`Fleet`): ``--ledger`` and
``--remote``, else git config ``applyonce.ledger`` and ``applyonce.remote`` (flags win), else the
repository's own ledger file and branch.

A shared ledger needs a shared commit point: with ``--ledger postgresql://…`` and no remote,
each clone's own branch would be where its calls land, so the ledger would record a call as
committed in one clone while the next clone's branch has no such commit (exit 5, "run recover",
for ever), and exactly-once across clones would be a promise nothing keeps. That combination is
refused when the context opens (:class:`LedgerNeedsRemoteError`, exit 2), before anything is
written.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from applyonce.core.redaction import redact_secrets
from applyonce.errors import ApplyOnceError, UsageError
from applyonce.flow.state_guard import check_state_location
from applyonce.git.checkouts import Checkouts
from applyonce.git.history import CallIdIndex, HistoryCache, MemoryHistoryCache
from applyonce.git.packs import REGISTRY_DIR
from applyonce.git.publisher import LocalRefPublisher, Publisher
from applyonce.git.store import GitStore
from applyonce.state.ledger import Ledger, LedgerBusyError
from applyonce.state.lockjournal import JOURNAL_DIR
from applyonce.state.receipts import ReceiptStore
from applyonce.state.sqlite.history import SqliteHistoryCache
from applyonce.state.sqlite.ledger import SqliteLedger

LEDGER_FILE = "ledger.sqlite3"
HISTORY_FILE = "call-index.sqlite3"
LEDGER_KEY = "applyonce.ledger"
REMOTE_KEY = "applyonce.remote"
# What --ledger / --remote accept for "this repository's own", over a config saying otherwise.
LOCAL_LEDGER = ("local", "sqlite")
LOCAL_REMOTE = "."
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class LedgerNeedsRemoteError(UsageError):
    """A shared (PostgreSQL) ledger without a remote as the commit point."""

    kind = "ledger-needs-remote"


@dataclass(frozen=True)
class Fleet:
    """Where the calls of this repository are recorded and published, as given on the command
    line (None: git config, else this repository's own). ``ledger``: a ``postgresql://`` URL, or
    ``local``. ``remote``: the name of a configured remote, or ``.`` for the repository itself."""

    ledger: str | None = None
    remote: str | None = None


@dataclass
class Context:
    """One repository as the use cases see it. ``read_only``: for inspection (log, show, audit,
    replay) — where there is no state yet, an empty record is read instead of one being made."""

    store: GitStore
    publisher: Publisher
    checkouts: Checkouts
    receipts: ReceiptStore
    state_dir: Path
    read_only: bool = False
    index: CallIdIndex | None = None
    # A PostgreSQL ledger's URL (None: the state directory's SQLite file).
    ledger_url: str | None = None
    # The remote whose branch is the commit point (None: the repository's own branch).
    remote: str | None = None
    _ledger: Ledger | None = field(default=None, repr=False)

    @property
    def ledger(self) -> Ledger:
        """The ledger, opened on first use for this repository: a shared one for the remote's
        repository (the same in every clone of it: :meth:`RemotePublisher.repository_id`; each
        repository's calls apart from any other's, :mod:`applyonce.state.postgres.ledger`), or
        the state directory's. A state directory given outside the repository (``--state-dir``)
        could be given to another repository too: its ledger records the repository that made
        it (by its Git directory) and refuses any other."""
        if self._ledger is None and self.ledger_url is not None:
            from applyonce.git.remote import RemotePublisher
            from applyonce.state.postgres import PostgresLedger  # psycopg only when asked for

            # open_context refuses a shared ledger without a remote.
            assert isinstance(self.publisher, RemotePublisher)
            self._ledger = PostgresLedger(self.ledger_url, repository=self.publisher.repository_id)
        if self._ledger is None:
            path = self.state_dir / LEDGER_FILE
            if self.read_only and not path.exists():
                self._ledger = SqliteLedger.empty(path)
                return self._ledger
            own = None
            if not self.state_dir.resolve().is_relative_to(self.store.common_dir):
                own = f"git-dir:{self.store.common_dir}"
            try:
                self._ledger = SqliteLedger(path, repository=own)
            except OSError as exc:
                raise UsageError(
                    f"cannot use state directory {self.state_dir}: {exc.strerror}",
                    hint="pass --state-dir with a writable directory",
                ) from None
        return self._ledger

    def require_remote_branch(self, ref: str) -> None:
        """With a remote as the commit point, refuse a branch the remote does not have while
        this repository's does: the call would start the remote's branch without its commits.
        Asked before anything else is judged against the remote's branch (whether the branch
        exists, what the checkout has uncommitted), which would say something false of it.

        Raises:
            RemoteBranchMissingError: so (its hint: the push that makes the remote have it).
        """
        if self.remote is None or self.store.tip(ref) is None:
            return
        if self.publisher.tip(ref) is None:
            from applyonce.git.remote import RemoteBranchMissingError

            raise RemoteBranchMissingError(self.remote, ref)

    @property
    def repo_root(self) -> str | None:
        """The work tree's root as an agent may spell absolute paths (None: a bare repo)."""
        workdir = self.store.workdir
        return str(workdir).rstrip("/") if workdir else None

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()
            self._ledger = None
        if self.index is not None:
            self.index.close()


def scratch_dir(ctx: Context) -> Path:
    """The pool of scratch checkouts the ``--check`` commands run in
    (:mod:`applyonce.flow.call.checks`)."""
    return ctx.state_dir / "scratch"


def open_context(
    repo: str | os.PathLike[str],
    *,
    state_dir: str | None = None,
    read_only: bool = False,
    fleet: Fleet = Fleet(),
) -> Context:
    """The context of the repository at (or above) ``repo``.

    Raises:
        NotARepositoryError: ``repo`` is not inside a Git repository.
        UsageError: the state directory cannot be one (not a directory, or where a patch could
            write it); the ledger or the remote is not one applyonce can use.
    """
    store = GitStore(repo)
    ledger_url = _ledger_url(store, fleet.ledger)
    remote = _remote(store, fleet.remote)
    if ledger_url is not None and remote is None:
        source = "--ledger" if fleet.ledger is not None else LEDGER_KEY
        raise LedgerNeedsRemoteError(
            f"{source} names a shared ledger, but no remote is the commit point: each clone's"
            " own branch cannot keep a call to one commit across the clones that share it",
            hint="pass --remote NAME (or git config applyonce.remote NAME), the remote every"
            " clone publishes to; or --ledger local for this clone's own ledger",
        )
    state = Path(state_dir) if state_dir else store.common_dir / "applyonce"
    existing = next(p for p in (state, *state.parents) if p.exists())
    if not existing.is_dir():
        raise UsageError(
            f"cannot use state directory {state}: {existing} is not a directory",
            hint="pass --state-dir with a writable directory",
        )
    check_state_location(store, state)
    # A call's packs: their .keep files journaled with the locks, the packs recorded as ours.
    store.written.record_in(state / JOURNAL_DIR, state / REGISTRY_DIR)
    index = CallIdIndex(store, lambda: _history_cache(state, read_only=read_only))
    publisher: Publisher
    if remote is None:
        publisher = LocalRefPublisher(store, index, state / JOURNAL_DIR)
    else:
        from applyonce.git.remote import RemotePublisher

        publisher = RemotePublisher(store, remote, index, state / JOURNAL_DIR)
    ctx = Context(
        store=store,
        publisher=publisher,
        checkouts=Checkouts(store, state / JOURNAL_DIR),
        receipts=ReceiptStore(state),
        state_dir=state,
        read_only=read_only,
        index=index,
        ledger_url=ledger_url,
        remote=remote,
    )
    if ledger_url is not None:
        # A shared ledger keeps the receipts too (every clone sees every clone's calls); the
        # files are a cache. The ledger is opened when first used, not here.
        ctx.receipts = ReceiptStore(state, mirror=lambda: ctx.ledger)
    return ctx


def _ledger_url(store: GitStore, given: str | None) -> str | None:
    """The PostgreSQL ledger's connection string (None: the local SQLite file), from
    ``--ledger`` or git config: a ``postgresql://`` URL or libpq ``key=value`` words
    (``host=/run/pg dbname=app``), passed to libpq as given.

    Raises:
        UsageError: it is neither of those nor ``local`` (said without its password).
    """
    source = "--ledger" if given is not None else LEDGER_KEY
    value = given if given is not None else store.config_value(LEDGER_KEY)
    if value is None or value.strip() in ("", *LOCAL_LEDGER):
        return None
    if value.startswith(POSTGRES_SCHEMES) or _CONNINFO_WORDS.match(value):
        return value
    raise UsageError(
        f"{source} {redact_secrets(value)!r} is not a ledger applyonce can use",
        hint="give a postgresql:// URL (e.g. postgresql://user@host/db) or libpq key=value"
        " words (host=… dbname=…), or 'local' for the repository's own ledger file",
    )


# libpq's other form of a connection string: key=value words (the first one is enough to tell).
_CONNINFO_WORDS = re.compile(r"\s*[A-Za-z_]+\s*=")


def _remote(store: GitStore, given: str | None) -> str | None:
    """The remote whose branch is the commit point (None: this repository's own), from
    ``--remote`` or git config.

    Raises:
        UsageError: no such remote is configured.
    """
    source = "--remote" if given is not None else REMOTE_KEY
    name = given if given is not None else store.config_value(REMOTE_KEY)
    if name is None or name.strip() in ("", LOCAL_REMOTE):
        return None
    if not _REMOTE_NAME.fullmatch(name) or ".." in name:
        # Never echoed into a command to run ('git remote add -oProxyCommand=...').
        raise UsageError(
            f"{source} {name[:100]!r} is not a remote name", hint="see 'git remote -v'"
        )
    if store.config_value(f"remote.{name}.url") is None:
        raise UsageError(
            f"{source} names {name!r}, but this repository has no remote of that name",
            hint=f"add it with 'git remote add {name} URL', or pass --remote {LOCAL_REMOTE} to "
            "publish to this repository's own branch",
        )
    return name


# The names git and applyonce's remote publisher accept (no option, no path, no shell syntax).
_REMOTE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,99}")


def _history_cache(state_dir: Path, *, read_only: bool) -> HistoryCache:
    """The history cache file, remade if it broke; in memory where it cannot be kept (it is only
    a cache: correctness never depends on it)."""
    path = state_dir / HISTORY_FILE
    if read_only and not path.exists():
        return MemoryHistoryCache()
    for _ in range(2):
        try:
            return SqliteHistoryCache(path)
        except LedgerBusyError:
            break
        except (ApplyOnceError, OSError):
            with contextlib.suppress(OSError):
                for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
                    stale.unlink(missing_ok=True)
    return MemoryHistoryCache()
