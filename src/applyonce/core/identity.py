r"""Call identity (docs/design.md §3): canonical JSON, normalised arguments, ``call_id``.

    args_sha256 = sha256(canonical(args))
    call_id     = sha256(canonical({"v": 1, "contract_sha256", "attempt", "tool", "tool_version",
                                    "args_sha256"}))

With a caller-supplied idempotency key the key replaces ``attempt`` and ``args_sha256``::

    call_id     = sha256(canonical({"v": 1, "contract_sha256", "tool", "tool_version",
                                    "idempotency_key"}))

and ``args_sha256`` is still stored, so reusing the key with other arguments is detected.
The default contract is the empty contract: ``sha256(b"")``.

**The canonical form is RFC 8785, the JSON Canonicalization Scheme (JCS)**, so a harness in any
language recomputes a ``Call-Id`` with a JCS library and SHA-256, from the commit's trailers alone:

* the body is a JSON object with exactly these members: ``v`` (the integer 1),
  ``contract_sha256`` (64 lowercase hex digits, trailer ``Contract-Sha256``), ``tool``
  (``Tool``), ``tool_version`` (``Tool-Version``), and either ``attempt`` (an integer, trailer
  ``Attempt``) with ``args_sha256`` (64 lowercase hex digits, ``Args-Sha256``), or, in key
  mode, ``idempotency_key`` alone (``Idempotency-Key``). A member is left out, never ``null``;
* members are ordered by their names' UTF-16 code units (JCS §3.2.3); every name here is ASCII,
  so that is plain byte order;
* no whitespace; strings are UTF-8, escaped only where JSON must (``"``, ``\``, and U+0000 to
  U+001F: ``\b \t \n \f \r``, else ``\u00xx`` with lowercase hex); integers in decimal digits;
* ``call_id`` is the lowercase hex SHA-256 of those bytes.

``args`` is canonicalised the same way: its names are the field names of the patch model
(ASCII), its strings the patch's texts (any Unicode; a text that is not UTF-8 is the object
``{"utf8b": <base64>}``), its integers line numbers. This serialiser is orjson with sorted keys,
which writes exactly JCS for such values: names ordered by code point equal UTF-16 order when
they are ASCII, orjson's string escapes are JCS's, and integers within ±(2**53-1) print alike
(``tests/core/test_identity_jcs.py`` checks it against the independent ``rfc8785`` package on
random identities). Floats never occur (:func:`canonical` refuses them).

JCS numbers are IEEE doubles, so an integer past 2**53-1 has no JCS form; the only identity field
that could hold one, an edit-json ``insert_line``, is refused past 2**53-1 by the parser (no file
has that many lines), so every identity has its JCS form.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from applyonce.core.paths import normalise_path
from applyonce.errors import UsageError
from applyonce.patch.model import (
    AddFile,
    CopyFile,
    DeleteFile,
    EditFile,
    FileOp,
    Patch,
    UpdateFile,
    has_raw_bytes,
    raw_from_base64,
    raw_to_base64,
)

TOOL = "apply_patch"
# The patch semantics: a change to what a patch does gives the same patch a new identity, so a
# receipt of the old semantics is never returned for it. /2: Codex blank context lines, anchors
# with their own indentation, ambiguous hunks refused, unified diffs' "\r" kept (0.2.0).
TOOL_VERSION = "applyonce-patch/2"
IDENTITY_VERSION = 1
EMPTY_CONTRACT_SHA256 = hashlib.sha256(b"").hexdigest()
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")


def canonical(value: Any) -> bytes:
    """The RFC 8785 (JCS) bytes of an identity value: JSON, keys sorted, no whitespace, UTF-8.

    Exactly JCS for what identities hold — ASCII keys, any strings, integers within
    ±(2**53-1) — see the module docstring. Floats are refused."""
    _refuse_floats(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


_PLAIN = (str, int, bool, type(None))


def _refuse_floats(value: Any) -> None:
    if isinstance(value, float):
        raise TypeError("identity values must not be floats")
    if isinstance(value, dict):
        for item in value.values():
            # A flat identity (strings, integers, None) costs no call per value: audit and
            # recover recompute ten thousand of them.
            if type(item) not in _PLAIN:
                _refuse_floats(item)
    elif isinstance(value, list | tuple):
        for item in value:
            if type(item) not in _PLAIN:
                _refuse_floats(item)


def patch_source(text: str, format: str) -> dict[str, str]:
    """The patch as sent, for the ledger (JSON): its text, or the base64 of its bytes when they
    are not all UTF-8 (a unified diff's content; ``model.py``)."""
    if has_raw_bytes(text):
        return {"text_utf8b": raw_to_base64(text), "format": format}
    return {"text": text, "format": format}


def source_text(source: dict[str, str]) -> str:
    """The text :func:`patch_source` recorded.

    Raises:
        KeyError, ValueError: not a record it made.
    """
    if not isinstance(source, dict):
        raise ValueError("a patch source is a JSON object")
    text = raw_from_base64(source["text_utf8b"]) if "text_utf8b" in source else source["text"]
    if not isinstance(text, str):
        raise ValueError("a patch source's text is a string")
    return text


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def is_sha256_hex(value: str) -> bool:
    return bool(_HEX64.match(value))


class ApplyPatchArgs(BaseModel):
    """The normalised arguments of one ``apply_patch`` call: what it changes, and where."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    ref: str
    operations: tuple[FileOp, ...] = Field(min_length=1)

    @classmethod
    def from_patch(cls, patch: Patch, *, ref: str, repo_root: str | None) -> ApplyPatchArgs:
        """Normalise every path of ``patch`` (refusing unsafe ones) and pin the target ref.

        Raises:
            UnsafePathError: a path breaks a rule of ``paths.py``.
        """
        ops: list[FileOp] = []
        for op in patch.operations:
            path = normalise_path(op.path, repo_root=repo_root)
            # model_copy keeps the fields excluded from dumps (line hints, source lines).
            if isinstance(op, UpdateFile):
                move_to = (
                    None if op.move_to is None else normalise_path(op.move_to, repo_root=repo_root)
                )
                ops.append(op.model_copy(update={"path": path, "move_to": move_to}))
            elif isinstance(op, CopyFile):
                copy_to = normalise_path(op.copy_to, repo_root=repo_root)
                ops.append(op.model_copy(update={"path": path, "copy_to": copy_to}))
            elif isinstance(op, AddFile | DeleteFile | EditFile):
                ops.append(op.model_copy(update={"path": path}))
        return cls(ref=ref, operations=tuple(ops))

    def patch(self) -> Patch:
        return Patch(operations=self.operations)

    def canonical(self) -> bytes:
        return canonical(self.model_dump(mode="json"))

    def sha256(self) -> str:
        return sha256_hex(self.canonical())


class CallIdentity(BaseModel):
    """Everything the ``call_id`` is computed from, and the ``call_id`` itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    contract_sha256: str
    attempt: int
    tool: str = TOOL
    tool_version: str = TOOL_VERSION
    args_sha256: str
    idempotency_key: str | None = None

    @classmethod
    def compute(
        cls,
        args_sha256: str,
        *,
        contract_sha256: str = EMPTY_CONTRACT_SHA256,
        attempt: int = 1,
        idempotency_key: str | None = None,
        tool: str = TOOL,
        tool_version: str = TOOL_VERSION,
    ) -> CallIdentity:
        """Build the identity of a call.

        Raises:
            UsageError: a malformed contract digest, attempt or key.
        """
        if not is_sha256_hex(contract_sha256):
            raise UsageError(
                f"contract digest {contract_sha256[:80]!r} is not 64 lowercase hex digits",
                hint="pass --contract FILE or --contract-sha with a sha256 hex digest",
            )
        if not 1 <= attempt < 2**53:
            raise UsageError(
                f"attempt must be from 1 to 2**53-1, not {attempt}", hint="pass --attempt N"
            )
        if idempotency_key is not None and not _KEY.match(idempotency_key):
            raise UsageError(
                "the idempotency key must be 1-200 printable ASCII characters without spaces",
                hint="pass a key such as the harness's run and step IDs",
            )
        fields: dict[str, Any] = dict(
            contract_sha256=contract_sha256,
            attempt=attempt,
            tool=tool,
            tool_version=tool_version,
            args_sha256=args_sha256,
            idempotency_key=idempotency_key,
        )
        return cls(call_id=call_id_of(**fields), **fields)

    def recompute(self) -> str:
        """The call_id these fields give (a stored call_id must equal it)."""
        return call_id_of(**self.model_dump(exclude={"call_id"}))


def call_id_of(
    *,
    contract_sha256: str,
    attempt: int,
    tool: str,
    tool_version: str,
    args_sha256: str,
    idempotency_key: str | None,
) -> str:
    """The ``call_id`` formula of docs/design.md §3."""
    body: dict[str, Any] = {
        "v": IDENTITY_VERSION,
        "contract_sha256": contract_sha256,
        "tool": tool,
        "tool_version": tool_version,
    }
    if idempotency_key is None:
        body.update(attempt=attempt, args_sha256=args_sha256)
    else:
        body["idempotency_key"] = idempotency_key
    return sha256_hex(canonical(body))
