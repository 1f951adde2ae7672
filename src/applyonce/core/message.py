"""The commit message of an applyonce commit (DESIGN §2)::

    apply_patch: M src/price.py, A tests/test_price.py

    Call-Id: <64 hex>
    Contract-Sha256: <64 hex>
    Attempt: 1
    Tool: apply_patch
    Tool-Version: applyonce-patch/2
    Args-Sha256: <64 hex>
    Idempotency-Key: <key>          (only in key mode)
    Tool-Call-Id: call_report       (only when the harness gave one)

The trailer block is the last paragraph, one ``Key: value`` per line, as ``git interpret-trailers``
parses it. A subject that would pass 72 characters names the first files and counts the rest; the
full list is then in the body.

With ``--dirty commit`` the call's commit has a parent of its own making, the snapshot of the
user's changes (:func:`build_snapshot_message`), trailer ``Snapshot-For: <call ID>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from applyonce.core.identity import CallIdentity
from applyonce.core.plan import TreePlan

SUBJECT_LIMIT = 72


def build_message(
    plan: TreePlan,
    ident: CallIdentity,
    *,
    tool_call_id: str | None,
    extra: Sequence[tuple[str, str]] = (),
) -> str:
    """The message of the call's commit; ``extra``: trailers of its kind of call
    (``Reverts-Call-Id``), after applyonce's own."""
    entries = plan.summary_lines()
    subject = f"{ident.tool}: " + ", ".join(entries)
    body = ""
    if len(subject) > SUBJECT_LIMIT:
        shown: list[str] = []
        for entry in entries:
            rest = len(entries) - len(shown) - 1
            candidate = f"{ident.tool}: " + ", ".join([*shown, entry]) + f" (+{rest} more)"
            if len(candidate) > SUBJECT_LIMIT and shown:
                break
            shown.append(entry)
        more = len(entries) - len(shown)
        subject = f"{ident.tool}: " + ", ".join(shown) + (f" (+{more} more)" if more else "")
        body = "\n".join(entries) + "\n\n"
    lines = [
        f"Call-Id: {ident.call_id}",
        f"Contract-Sha256: {ident.contract_sha256}",
        f"Attempt: {ident.attempt}",
        f"Tool: {ident.tool}",
        f"Tool-Version: {ident.tool_version}",
        f"Args-Sha256: {ident.args_sha256}",
    ]
    if ident.idempotency_key is not None:
        lines.append(f"Idempotency-Key: {ident.idempotency_key}")
    if tool_call_id is not None:
        lines.append(f"Tool-Call-Id: {tool_call_id}")
    lines.extend(f"{key}: {value}" for key, value in extra)
    return f"{subject}\n\n{body}" + "\n".join(lines) + "\n"


SNAPSHOT_FOR = "Snapshot-For"


def build_snapshot_message(call_id: str, paths: Sequence[str]) -> str:
    """The message of the commit that snapshots the user's uncommitted changes to the paths a
    call touches (``--dirty commit``), before the call's own commit::

        applyonce: uncommitted changes before <first 12 hex of the call ID>

        src/price.py

        Snapshot-For: <call ID>

    It carries no ``Call-Id``: audit, recovery and adoption never take it for the call."""
    body = "\n".join(sorted(paths))
    return (
        f"applyonce: uncommitted changes before {call_id[:12]}\n\n"
        + (f"{body}\n\n" if body else "")
        + f"{SNAPSHOT_FOR}: {call_id}\n"
    )


def identity_from_trailers(trailers: Mapping[str, str]) -> CallIdentity | None:
    """The identity a commit's trailers state, or None if they are not an applyonce block."""
    try:
        return CallIdentity(
            call_id=trailers["Call-Id"],
            contract_sha256=trailers["Contract-Sha256"],
            attempt=int(trailers.get("Attempt", "1")),
            tool=trailers["Tool"],
            tool_version=trailers["Tool-Version"],
            args_sha256=trailers["Args-Sha256"],
            idempotency_key=trailers.get("Idempotency-Key"),
        )
    except (KeyError, ValueError):
        return None
