"""Settling many calls with few ledger transactions (``applyonce recover`` of a thousand calls).

A :class:`DeferredLedger` stands in for the ledger while a batch of calls is settled: the events
the settling records are kept, and :meth:`DeferredLedger.flush` records them all in one
transaction. Each receipt is still written (atomically, its data fsynced, then its directory once
for the batch, :meth:`ReceiptStore.batch`) before the transaction that
records its event, so a ledger row never names a receipt that is not on disk; a crash before the
flush leaves each call of the batch as a crash after its receipt leaves one call (the next
``recover`` settles it again, the same way). The events of the batch's calls are read once, up
front, instead of once per question about a call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from applyonce.core.identity import CallIdentity
from applyonce.state.lease import DEFAULT_LEASE_S
from applyonce.state.ledger import (
    NO_CHANGE,
    CallRow,
    Claim,
    Event,
    Ledger,
    LoggedEvent,
    Owner,
    RowChange,
)


class DeferredLedger:
    """A :class:`Ledger` over ``inner`` whose ``record`` waits for :meth:`flush`, and whose
    ``events`` of the calls in ``prefetched`` come from one read made up front. Only for
    settling calls this process has claimed: nobody else writes their events meanwhile, and the
    settling reads no event it recorded itself."""

    def __init__(
        self,
        inner: Ledger,
        prefetched: Iterable[str] = (),
        *,
        before_flush: Callable[[], None] | None = None,
    ) -> None:
        self.inner = inner
        self._before_flush = before_flush
        self._pending: list[Event] = []
        self._known = set(prefetched)
        self._events = inner.events_of(self._known) if self._known else {}
        self.flushes = 0

    def flush(self) -> None:
        """Record every event kept so far, in one transaction."""
        if self._pending:
            if self._before_flush is not None:
                self._before_flush()  # the receipts the events name are durable first
            pending, self._pending = self._pending, []
            self.inner.record(*pending)
            self.flushes += 1

    def record(self, *events: Event) -> None:
        self._pending.extend(events)

    def events(self, call_id: str | None = None) -> list[LoggedEvent]:
        if call_id is not None and call_id in self._known:
            return list(self._events.get(call_id, []))
        return self.inner.events(call_id)

    def events_of(self, call_ids: Iterable[str]) -> dict[str, list[LoggedEvent]]:
        return self.inner.events_of(call_ids)

    # --- the rest is the inner ledger's ----------------------------------------------------

    def claim(
        self,
        ident: CallIdentity,
        *,
        ref: str,
        owner: Owner,
        lease_seconds: float = DEFAULT_LEASE_S,
        args: BaseModel | None = None,
        source: dict[str, str] | None = None,
    ) -> Claim:
        return self.inner.claim(
            ident, ref=ref, owner=owner, lease_seconds=lease_seconds, args=args, source=source
        )

    def reopen(
        self,
        call_id: str,
        *,
        owner: Owner,
        rejected: str,
        lease_seconds: float = DEFAULT_LEASE_S,
        data: Mapping[str, Any] | None = None,
    ) -> Claim | None:
        return self.inner.reopen(
            call_id, owner=owner, rejected=rejected, lease_seconds=lease_seconds, data=data
        )

    def take_over(
        self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> str | None:
        return self.inner.take_over(call_id, owner, lease_seconds=lease_seconds)

    def take_over_many(
        self, call_ids: Iterable[str], owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S
    ) -> dict[str, str]:
        return self.inner.take_over_many(call_ids, owner, lease_seconds=lease_seconds)

    def renew(self, call_id: str, owner: Owner, *, lease_seconds: float = DEFAULT_LEASE_S) -> bool:
        return self.inner.renew(call_id, owner, lease_seconds=lease_seconds)

    def release(self, call_id: str, *, by: Owner, note: str = "") -> CallRow:
        return self.inner.release(call_id, by=by, note=note)

    def ensure_row(
        self, ident: CallIdentity, ref: str, *, reason: str, change: RowChange = NO_CHANGE
    ) -> bool:
        return self.inner.ensure_row(ident, ref, reason=reason, change=change)

    def get(self, call_id: str) -> CallRow | None:
        return self.inner.get(call_id)

    def get_many(self, call_ids: Iterable[str]) -> dict[str, CallRow]:
        return self.inner.get_many(call_ids)

    def calls(self, *, states: tuple[str, ...] | None = None) -> list[CallRow]:
        return self.inner.calls(states=states)

    def unsynced(self, ref: str | None = None) -> list[CallRow]:
        return self.inner.unsynced(ref)

    def close(self) -> None:
        self.inner.close()
