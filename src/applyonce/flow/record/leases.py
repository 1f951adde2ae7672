"""A call's claim as a lease (docs/design.md §11): how long it is, and the heartbeat that renews it.

The length comes from ``--lease-seconds`` (:attr:`CallOptions.lease_seconds`), else git config
``applyonce.leaseSeconds`` (where a patch cannot change it), else 30 s. The rules that decide
when a claim may be taken over are the ledger's (:mod:`applyonce.state.lease`).
"""

from __future__ import annotations

import math
from typing import Any

from applyonce.errors import UsageError
from applyonce.flow.context import Context
from applyonce.state.lease import DEFAULT_LEASE_S, MAX_LEASE_S, MIN_LEASE_S, Heartbeat, Owner

CONFIG_KEY = "applyonce.leaseSeconds"


def lease_length(ctx: Context, given: float | None) -> float:
    """The lease length of this process's claims.

    Raises:
        UsageError: ``--lease-seconds`` or ``applyonce.leaseSeconds`` is not a number of seconds
            between 0.5 and 86400 (nothing is written).
    """
    if given is not None:
        return checked_lease(given)
    configured = ctx.store.config_value(CONFIG_KEY)
    if configured is None:
        return DEFAULT_LEASE_S
    try:
        value = float(configured)
    except ValueError:
        value = math.nan
    return checked_lease(value, f"{CONFIG_KEY} in git config", shown=configured)


def checked_lease(
    value: float, name: str = "--lease-seconds", *, shown: str | None = None
) -> float:
    """``value`` if it is a lease length applyonce accepts.

    Raises:
        UsageError: it is not (NaN, too short, too long).
    """
    if not MIN_LEASE_S <= value <= MAX_LEASE_S:  # NaN fails too
        raise UsageError(
            f"{name} must be a number of seconds from {MIN_LEASE_S:g} to {MAX_LEASE_S:g}, "
            f"not {shown if shown is not None else format(value, 'g')!r}",
            hint=f"pass --lease-seconds N, or run 'git config {CONFIG_KEY} N'",
        )
    return value


class Lessee:
    """This process as the holder of one call's claim: the owner it claims as, the lease length,
    and the heartbeat that renews the claim from :meth:`claimed` until the ``with`` block ends."""

    def __init__(self, ctx: Context, call_id: str, lease_seconds: float) -> None:
        self.ctx = ctx
        self.call_id = call_id
        self.seconds = lease_seconds
        self.owner = Owner.me()
        self._heartbeat = Heartbeat(lease_seconds)

    def claimed(self) -> None:
        """The claim is taken: keep it renewed. The ledger is read here, in the caller's thread
        (a SQLite ledger is opened by its first use, which must not be the heartbeat's)."""
        ledger, call_id, owner, seconds = self.ctx.ledger, self.call_id, self.owner, self.seconds
        self._heartbeat.start(lambda: ledger.renew(call_id, owner, lease_seconds=seconds))

    def __enter__(self) -> Lessee:
        self._heartbeat.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._heartbeat.__exit__(*exc_info)
