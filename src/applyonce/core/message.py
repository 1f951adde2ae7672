"""The commit message of an applyonce commit (docs/design.md §2)::

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

The caller may word the message (``apply --message``, an MCP ``summary``): its first line replaces
the subject, the rest is the body. Its own trailers (``--trailer Co-authored-by=…``) go in the
same last paragraph, before applyonce's, since git reads only the last paragraph as trailers; a
caller's trailer may not use a token applyonce reads (:data:`RESERVED_TRAILERS`), so it can neither
override nor forge one. None of this is part of the call's identity (docs/design.md §3: a call is
its
patch): a repeat returns the first call's commit, worded as that call worded it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from applyonce.core.identity import CallIdentity
from applyonce.core.plan import TreePlan
from applyonce.errors import UsageError

SUBJECT_LIMIT = 72
# Tokens applyonce writes or reads in a commit's trailers, compared without regard to case.
RESERVED_TRAILERS = frozenset(
    token.lower()
    for token in (
        "Call-Id",
        "Contract-Sha256",
        "Attempt",
        "Tool",
        "Tool-Version",
        "Args-Sha256",
        "Idempotency-Key",
        "Tool-Call-Id",
        "Snapshot-For",
        "Reverts-Call-Id",
        "Lands-Call-Id",
        "Lane-Commit",
    )
)
_TOKEN = re.compile(r"[A-Za-z0-9-]+")  # a trailer token, as git's trailer.c reads one
# A line that hides what follows it from git's trailer parser: a scissors line (commit.c).
_SCISSORS = re.compile(r"^\S? ?-+ >8 -+$", re.MULTILINE)
MESSAGE_LIMIT = 64 * 1024


def check_message(message: str | None) -> str | None:
    """``message`` as the commit will carry it (subject, then the body after a blank line), or
    None for the default.

    Raises:
        UsageError: an empty subject, a NUL byte, a scissors line, or over 64 KiB.
    """
    if message is None:
        return None
    lines = message.replace("\r\n", "\n").strip().split("\n")
    subject = lines[0].strip()
    body = "\n".join(line.rstrip() for line in lines[1:]).strip("\n")
    if not subject:
        raise UsageError("the commit message is empty", hint="give --message a subject line")
    if "\0" in message or "\r" in subject or len(message) > MESSAGE_LIMIT:
        raise UsageError(
            "the commit message has a NUL byte or a carriage return, or is over 64 KiB",
            hint="give --message plain text",
        )
    if _SCISSORS.search(body):
        raise UsageError(
            "the commit message has a scissors line ('-- >8 --'), which would hide the call's "
            "trailers from git",
            hint="leave that line out of --message",
        )
    return subject + (f"\n\n{body}" if body else "")


def check_trailers(pairs: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The caller's trailers, each ``(token, value)`` checked.

    Raises:
        UsageError: a token that is not a git trailer token, or one applyonce reads; an empty
            value, or one with a line break.
    """
    out = []
    for token, value in pairs:
        token, value = token.strip(), value.strip()
        if not _TOKEN.fullmatch(token):
            raise UsageError(
                f"--trailer {token[:60]!r}: not a git trailer key (letters, digits and '-' only)",
                hint="write it as KEY=VALUE, e.g. --trailer 'Co-authored-by=Name <mail>'",
            )
        if token.lower() in RESERVED_TRAILERS:
            raise UsageError(
                f"--trailer {token}: applyonce writes that trailer itself; it cannot be given",
                hint="use another key",
            )
        if not value or any(c in value for c in "\r\n\0"):
            raise UsageError(
                f"--trailer {token}: the value is empty or has a line break",
                hint="give a one-line value: --trailer KEY=VALUE",
            )
        out.append((token, value))
    return tuple(out)


CO_AUTHORED_BY = "Co-authored-by"
SIGNED_OFF_BY = "Signed-off-by"


def policy_trailers(
    trailers: Sequence[tuple[str, str]], co_authors: Sequence[str], signoff: str | None
) -> tuple[tuple[str, str], ...]:
    """The caller's ``trailers``, then a ``Co-authored-by:`` for each of ``co_authors`` not
    among them, then ``Signed-off-by: <signoff>`` unless the last trailer already is that
    sign-off (as ``git commit -s`` adds it). All of them go before applyonce's ``Call-Id``
    block, which stays last."""
    out = list(trailers)
    for person in co_authors:
        if (CO_AUTHORED_BY, person) not in out:
            out.append((CO_AUTHORED_BY, person))
    if signoff is not None and (not out or out[-1] != (SIGNED_OFF_BY, signoff)):
        out.append((SIGNED_OFF_BY, signoff))
    return tuple(out)


def build_message(
    plan: TreePlan,
    ident: CallIdentity,
    *,
    tool_call_id: str | None,
    extra: Sequence[tuple[str, str]] = (),
    message: str | None = None,
    trailers: Sequence[tuple[str, str]] = (),
) -> str:
    """The message of the call's commit: ``message`` (checked by :func:`check_message`) or the
    default subject and body, then one last paragraph: the caller's ``trailers``, applyonce's
    own, and ``extra``, trailers of its kind of call (``Reverts-Call-Id``)."""
    own = [f"{token}: {value}" for token, value in trailers]
    if message is not None:
        lines = [*own, *_identity_lines(ident, tool_call_id, extra)]
        return f"{message}\n\n" + "\n".join(lines) + "\n"
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
    lines = [*own, *_identity_lines(ident, tool_call_id, extra)]
    return f"{subject}\n\n{body}" + "\n".join(lines) + "\n"


def _identity_lines(
    ident: CallIdentity, tool_call_id: str | None, extra: Sequence[tuple[str, str]]
) -> list[str]:
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
    return lines


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
