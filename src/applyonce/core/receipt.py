"""The receipt (docs/design.md §4): the record of one call, as a model, and its self-verification.

A receipt is never trusted as read: its ``call_id`` must recompute from its own fields and its
``output_sha256`` must match its output (:func:`parse_receipt`). That its digest matches the one the
ledger recorded and that a committed receipt's files match the commit are checked by the callers
that hold the ledger and the repository.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from applyonce.core.identity import CallIdentity, call_id_of
from applyonce.core.plan import TreePlan
from applyonce.errors import StateError

SCHEMA = 1
Status = Literal["prepared", "committed", "rejected", "unknown"]
TERMINAL: frozenset[str] = frozenset({"committed", "rejected"})
# A Git object ID, SHA-1 or SHA-256: what a receipt's commits and blobs must look like before
# anything asks Git about them.
_OBJECT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_IDENTITY_FIELDS = tuple(CallIdentity.model_fields)
_RECOMPUTED_FROM = tuple(name for name in _IDENTITY_FIELDS if name != "call_id")
_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/\s]*@")  # to the last @


class ReceiptError(StateError):
    """A receipt is unreadable, or does not agree with itself, the ledger or Git."""

    kind = "receipt-invalid"
    default_hint = "do not trust it; run 'applyonce recover' to rebuild it from the commit"


def _utf8(value: str) -> str:
    """``value`` with its surrogate escapes (bytes of a command line that are not UTF-8: a check
    command, a note) written as the text ``\\udcXX``: a receipt is JSON in UTF-8."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class FileRecord(BaseModel):
    """One changed path. ``blob`` and ``sha256`` are None for a deletion."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    path: str
    action: Literal["add", "update", "delete", "move"]
    from_: str | None = Field(default=None, alias="from")
    blob: str | None
    sha256: str | None
    mode: str | None


class CheckRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    exit_code: int | None
    duration_ms: int
    output_tail: str

    @field_validator("name", "output_tail")
    @classmethod
    def _utf8(cls, value: str) -> str:
        return _utf8(value)


class SignatureRecord(BaseModel):
    """How the call's commit is signed (:mod:`applyonce.core.signature`): ``format``
    (``openpgp``, ``ssh`` or ``x509``) and ``key``, the key that made it (an openpgp issuer
    fingerprint, an ssh ``SHA256:`` fingerprint; None when the signature does not say)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["openpgp", "ssh", "x509"]
    key: str | None = None


class Receipt(BaseModel):
    """The record of one call. Field names are a contract (docs/design.md §4)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_: int = Field(default=SCHEMA, alias="schema")
    call_id: str
    status: Status
    execution_id: str
    tool: str
    tool_version: str
    contract_sha256: str
    attempt: int
    args_sha256: str
    idempotency_key: str | None = None
    tool_call_id: str | None = None
    ref: str
    base_commit: str | None = None
    commit: str | None = None
    files: tuple[FileRecord, ...] = ()
    match_levels: dict[str, list[str]] = Field(default_factory=dict)
    checks: tuple[CheckRecord, ...] = ()
    output: str = ""
    output_sha256: str = ""
    exit_code: int | None = None
    error: dict[str, Any] | None = None
    reconciled: bool = False
    note: str | None = None  # a person's words, from 'applyonce resolve'
    # The remote whose branch the call was published to (its URL, no user name or password);
    # None, and absent from the JSON, for the repository's own branch.
    remote: str | None = None
    # The commit's signature, read from the commit (None, and absent from the JSON: unsigned).
    signature: SignatureRecord | None = None
    # The call was made with --no-verify: the repository's pre-commit and commit-msg hooks did
    # not run. Absent from the JSON when false.
    no_verify: bool = False
    created_at: str
    updated_at: str

    @field_validator("note")
    @classmethod
    def _note_utf8(cls, value: str | None) -> str | None:
        return None if value is None else _utf8(value)

    @classmethod
    def of_call(
        cls,
        ident: CallIdentity,
        *,
        status: Status,
        execution_id: str,
        ref: str,
        created_at: str | None = None,
        **fields: Any,
    ) -> Receipt:
        """A receipt for the call ``ident`` (its identity fields copied), with ``fields`` set."""
        stamp = now()
        return cls(
            call_id=ident.call_id,
            status=status,
            execution_id=execution_id,
            tool=ident.tool,
            tool_version=ident.tool_version,
            contract_sha256=ident.contract_sha256,
            attempt=ident.attempt,
            args_sha256=ident.args_sha256,
            idempotency_key=ident.idempotency_key,
            ref=ref,
            created_at=created_at or stamp,
            updated_at=stamp,
            **fields,
        )

    @property
    def identity(self) -> CallIdentity:
        return CallIdentity(**{name: getattr(self, name) for name in _IDENTITY_FIELDS})

    def recomputed_call_id(self) -> str:
        """The call ID the receipt's identity fields give (``self.identity.recompute()``, without
        building the identity: the fields have the same types here)."""
        return call_id_of(**{name: getattr(self, name) for name in _RECOMPUTED_FROM})

    @property
    def retryable(self) -> bool:
        return self.status == "rejected" and bool(self.error and self.error.get("retryable"))

    def to_json(self) -> bytes:
        fields = self.model_dump(mode="json", by_alias=True)
        if fields["remote"] is None:
            del fields["remote"]  # a local call's receipt reads as it always has
        if fields["signature"] is None:
            del fields["signature"]  # so does an unsigned call's
        if not fields["no_verify"]:
            del fields["no_verify"]  # likewise a call that ran the hooks
        return (
            orjson.dumps(
                fields,
                option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2,
            )
            + b"\n"
        )

    def with_output(self, output: str, **update: Any) -> Receipt:
        return self.model_copy(
            update={
                "output": output,
                "output_sha256": hashlib.sha256(output.encode()).hexdigest(),
                "updated_at": now(),
                **update,
            }
        )


def public_url(url: str) -> str:
    """``url`` without its user name and password (``https://u:p@h/r`` -> ``https://h/r``)."""
    return _USERINFO.sub(r"\g<scheme>", url)


def parse_receipt(data: bytes, *, call_id: str, expected_sha256: str | None = None) -> Receipt:
    """Parse and self-verify receipt bytes. See :class:`ReceiptStore`."""
    short = call_id[:12]
    if expected_sha256 is not None and hashlib.sha256(data).hexdigest() != expected_sha256:
        raise ReceiptError(f"receipt {short} was changed after applyonce wrote it", call_id=call_id)
    try:
        receipt = Receipt.model_validate(orjson.loads(data))
    except (orjson.JSONDecodeError, ValidationError) as exc:
        first = str(exc).splitlines()[0][:120]
        raise ReceiptError(f"receipt {short} is unreadable ({first})", call_id=call_id) from None
    if receipt.schema_ != SCHEMA:
        raise ReceiptError(f"receipt {short} has unknown schema {receipt.schema_}", call_id=call_id)
    if receipt.call_id != call_id or receipt.recomputed_call_id() != call_id:
        raise ReceiptError(
            f"receipt {short}: its call ID does not recompute from its fields", call_id=call_id
        )
    if receipt.output_sha256 and (
        hashlib.sha256(receipt.output.encode()).hexdigest() != receipt.output_sha256
    ):
        raise ReceiptError(f"receipt {short}: output does not match output_sha256", call_id=call_id)
    malformed = _malformed_ids(receipt)
    if malformed:
        raise ReceiptError(f"receipt {short}: {malformed} is not an object ID", call_id=call_id)
    return receipt


def _malformed_ids(receipt: Receipt) -> str | None:
    """The first field that should hold a Git object ID or a sha256 and does not."""
    ids = [("commit", receipt.commit), ("base_commit", receipt.base_commit)]
    ids += [(f"the blob of {f.path!r}", f.blob) for f in receipt.files]
    for name, value in ids:
        if value is not None and not _OBJECT_ID.fullmatch(value):
            return name
    for f in receipt.files:
        if f.sha256 is not None and not _SHA256.fullmatch(f.sha256):
            return f"the sha256 of {f.path!r}"
    return None


def records_of_plan(
    tree_plan: TreePlan, blobs: dict[str, str]
) -> tuple[tuple[FileRecord, ...], dict[str, list[str]]]:
    """The receipt's ``files`` and ``match_levels`` for a plan whose blobs were written."""
    files = tuple(
        FileRecord(
            path=c.path,
            action=c.action,
            **{"from": c.from_path},
            blob=blobs.get(c.path),
            sha256=hashlib.sha256(c.content).hexdigest() if c.content is not None else None,
            mode=f"{c.mode:o}" if c.content is not None else None,
        )
        for c in tree_plan.changes
    )
    levels = {
        c.path: [level.label for level in c.match_levels]
        for c in tree_plan.changes
        if c.match_levels
    }
    return files, levels


def touched_paths_of(receipt: Receipt) -> set[str]:
    """Every path a receipt's call changed, the sources of its moves included."""
    return {f.path for f in receipt.files} | {f.from_ for f in receipt.files if f.from_}
