"""Rows and events read back from any ledger's storage: untrusted until they have the right shape.

A ledger is a file anyone can edit, or a database anyone with its password can: a row of another
shape must be refused as unreadable (a one-line :class:`LedgerError`), not crash whatever reads it.
Every backend reads its rows through :func:`call_row` and :func:`logged_event`, so they refuse the
same things. A state this version does not know is not refused here: a claim settles such a call
from Git.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import ValidationError

from applyonce.core.identity import CallIdentity, is_sha256_hex
from applyonce.state.lease import Lease
from applyonce.state.ledger import CallRow, LedgerError, LoggedEvent, Owner

# What a row may hold, column by column (None: NULL). The lease and namespace columns are read
# leniently (anything unreadable counts as not recorded: the lease decides).
ROW_TYPES: dict[str, tuple[type | None, ...]] = {
    "call_id": (str,),
    "state": (str,),
    "execution_id": (str, None),
    "args_sha256": (str,),
    "idempotency_key": (str, None),
    "ref": (str,),
    "base_commit": (str, None),
    "commit_id": (str, None),
    "exit_code": (int, None),
    "retryable": (int,),
    "receipt_sha256": (str, None),
    "synced": (int,),
    "owner_pid": (int, None),
    "owner_host": (str, None),
    "owner_start": (str, None),
    "created_at": (str,),
    "updated_at": (str,),
}


def is_of(value: Any, types: tuple[type | None, ...]) -> bool:
    """``value`` is one of ``types`` (None in ``types``: NULL is allowed)."""
    if type(value) in types:  # the common case, exactly a column's type: no scan
        return True
    return (value is None and None in types) or any(
        t is not None and isinstance(value, t) for t in types
    )


def malformed(where: str, what: str, call_id: Any) -> LedgerError:
    """The error for a row or event of the ledger ``where`` that has not the shape it should."""
    return LedgerError(
        f"the ledger {where} has a malformed {what} (call {str(call_id)[:16]!r})",
        call_id=call_id if isinstance(call_id, str) else None,
    )


def call_row(r: dict[str, Any], where: str) -> CallRow:
    """The row of ``calls`` whose columns are ``r`` (by name; extra columns are ignored).

    Raises:
        LedgerError: it has not the shape applyonce writes.
    """
    for column, types in ROW_TYPES.items():  # a loop, not all(…): recover reads many rows
        value = r.get(column)
        if type(value) not in types and not is_of(value, types):
            raise malformed(where, "row", r.get("call_id"))
    if not is_sha256_hex(r["call_id"]):
        raise malformed(where, "row", r.get("call_id"))
    owner = (
        Owner(
            r["owner_pid"],
            r["owner_host"] or "",
            r["owner_start"] or "",
            _text(r.get("owner_pidns")),
            _text(r.get("owner_boot")),
        )
        if r["owner_pid"] is not None
        else None
    )
    lease = (
        Lease(str(r["lease_expires_at"]), _seconds(r.get("lease_seconds")))
        if r.get("lease_expires_at") is not None
        else None
    )
    return CallRow(
        call_id=r["call_id"],
        state=r["state"],
        execution_id=r["execution_id"],
        args_sha256=r["args_sha256"],
        idempotency_key=r["idempotency_key"],
        ref=r["ref"],
        base_commit=r["base_commit"],
        commit_id=r["commit_id"],
        exit_code=r["exit_code"],
        retryable=bool(r["retryable"]),
        receipt_sha256=r["receipt_sha256"],
        synced=bool(r["synced"]),
        owner=owner,
        updated_at=r["updated_at"],
        lease=lease,
    )


def logged_event(
    where: str, seq: Any, call_id: Any, execution_id: Any, kind: Any, at: Any, data: Any
) -> LoggedEvent:
    """An event read back (``data``: its JSON text).

    Raises:
        LedgerError: it has not the shape applyonce writes.
    """
    try:
        decoded = orjson.loads(data) if isinstance(data, str) else None
    except orjson.JSONDecodeError:
        decoded = None
    if not (
        isinstance(seq, int)
        and isinstance(call_id, str)
        and is_of(execution_id, (str, None))
        and isinstance(kind, str)
        and isinstance(at, str)
        and isinstance(decoded, dict)
        and isinstance(decoded.get("set", {}), dict)
        and _identity_ok(decoded)
    ):
        raise malformed(where, f"event #{seq}", call_id)
    return LoggedEvent(seq, call_id, execution_id, kind, at, decoded)


def _identity_ok(data: dict[str, Any]) -> bool:
    """An event's recorded identity, if it has one, is one (recover rebuilds receipts from it)."""
    if "identity" not in data:
        return True
    try:
        CallIdentity.model_validate(data["identity"])
    except ValidationError:
        return False
    return True


def _seconds(value: Any) -> float:
    """A lease length as read back (anything but a number counts as none)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _text(value: Any) -> str:
    """An owner's namespace or boot as read back (anything but text counts as not recorded)."""
    return value if isinstance(value, str) else ""
