"""The context every use case runs in: one repository, its state directory, and the seams.

:func:`open_context` wires the implementations: the repository (:class:`GitStore`), its publisher
(:class:`LocalRefPublisher`), the ledger (:class:`SqliteLedger`, opened on first use), the
receipts directory, and the Call-Id history cache. A later ledger or publisher is one change here.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from applyonce.errors import ApplyOnceError, UsageError
from applyonce.flow.state_guard import check_state_location
from applyonce.git.checkouts import Checkouts
from applyonce.git.history import CallIdIndex, HistoryCache, MemoryHistoryCache
from applyonce.git.publisher import LocalRefPublisher, Publisher
from applyonce.git.store import GitStore
from applyonce.state.ledger import Ledger, LedgerBusyError
from applyonce.state.lockjournal import JOURNAL_DIR
from applyonce.state.receipts import ReceiptStore
from applyonce.state.sqlite.history import SqliteHistoryCache
from applyonce.state.sqlite.ledger import SqliteLedger

LEDGER_FILE = "ledger.sqlite3"
HISTORY_FILE = "call-index.sqlite3"


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
    _ledger: Ledger | None = field(default=None, repr=False)

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            path = self.state_dir / LEDGER_FILE
            if self.read_only and not path.exists():
                self._ledger = SqliteLedger.empty(path)
                return self._ledger
            try:
                self._ledger = SqliteLedger(path)
            except OSError as exc:
                raise UsageError(
                    f"cannot use state directory {self.state_dir}: {exc.strerror}",
                    hint="pass --state-dir with a writable directory",
                ) from None
        return self._ledger

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


def open_context(
    repo: str | os.PathLike[str], *, state_dir: str | None = None, read_only: bool = False
) -> Context:
    """The context of the repository at (or above) ``repo``.

    Raises:
        NotARepositoryError: ``repo`` is not inside a Git repository.
        UsageError: the state directory cannot be one (not a directory, or where a patch could
            write it).
    """
    store = GitStore(repo)
    state = Path(state_dir) if state_dir else store.common_dir / "applyonce"
    existing = next(p for p in (state, *state.parents) if p.exists())
    if not existing.is_dir():
        raise UsageError(
            f"cannot use state directory {state}: {existing} is not a directory",
            hint="pass --state-dir with a writable directory",
        )
    check_state_location(store, state)
    index = CallIdIndex(store, lambda: _history_cache(state, read_only=read_only))
    return Context(
        store=store,
        publisher=LocalRefPublisher(store, index, state / JOURNAL_DIR),
        checkouts=Checkouts(store, state / JOURNAL_DIR),
        receipts=ReceiptStore(state),
        state_dir=state,
        read_only=read_only,
        index=index,
    )


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
