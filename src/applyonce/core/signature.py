"""What a commit's signature says about itself: its format and the key that made it
(docs/design.md §2, §4). Pure: the ``gpgsig`` header's text in, a record out; nothing is verified.

* ``openpgp`` (``-----BEGIN PGP SIGNATURE-----``): the key is the issuer's fingerprint (hex,
  upper case) of the signature packet's issuer-fingerprint subpacket, else its 16-hex key ID.
* ``ssh`` (``-----BEGIN SSH SIGNATURE-----``): the key is the public key's ``SHA256:`` fingerprint,
  as ``ssh-keygen -l`` prints it.
* ``x509`` (``-----BEGIN SIGNED MESSAGE-----``, gpgsm's CMS): no key is read (None).

The receipt's ``signature`` is derived from the published commit, never from how applyonce meant
to sign it: a call finished by ``recover`` records what a call that ran to its end records.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from typing import Literal

SignatureFormat = Literal["openpgp", "ssh", "x509"]
_ARMORS: dict[str, SignatureFormat] = {
    "-----BEGIN PGP SIGNATURE-----": "openpgp",
    "-----BEGIN SSH SIGNATURE-----": "ssh",
    "-----BEGIN SIGNED MESSAGE-----": "x509",
}
_ISSUER_FINGERPRINT = 33
_ISSUER_KEY_ID = 16


def describe(signature: str) -> tuple[SignatureFormat, str | None] | None:
    """``(format, key)`` of an armored signature, or None for a text that is none of git's."""
    lines = signature.replace("\r", "").strip("\n").split("\n")
    kind = _ARMORS.get(lines[0].strip()) if lines else None
    if kind is None:
        return None
    body = _armored_body(lines)
    if body is None:
        return kind, None
    if kind == "ssh":
        return kind, _ssh_key(body)
    if kind == "openpgp":
        return kind, _pgp_issuer(body)
    return kind, None


def _armored_body(lines: list[str]) -> bytes | None:
    """The base64 between the armor lines (after PGP's header lines and their blank line,
    without its ``=`` checksum line)."""
    inner = [line.strip() for line in lines[1:] if not line.startswith("-----END")]
    if "" in inner:  # PGP armor: headers, a blank line, then the data
        inner = inner[inner.index("") + 1 :]
    data = "".join(line for line in inner if line and not line.startswith("="))
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return None


def _ssh_key(blob: bytes) -> str | None:
    """The ``SHA256:`` fingerprint of the public key in an SSHSIG blob (PROTOCOL.sshsig:
    ``"SSHSIG"``, uint32 version, string publickey, …)."""
    if not blob.startswith(b"SSHSIG") or len(blob) < 14:
        return None
    (length,) = struct.unpack(">I", blob[10:14])
    key = blob[14 : 14 + length]
    if len(key) != length:
        return None
    digest = base64.b64encode(hashlib.sha256(key).digest()).decode().rstrip("=")
    return f"SHA256:{digest}"


def _pgp_issuer(data: bytes) -> str | None:
    """The issuer of the first (version 4 or 5) signature packet (RFC 4880 §5.2.3)."""
    try:
        body = _first_packet(data)
        if body is None or body[0] not in (4, 5):
            return None
        hashed_len = struct.unpack(">H", body[4:6])[0]
        hashed = body[6 : 6 + hashed_len]
        rest = body[6 + hashed_len :]
        unhashed = rest[2 : 2 + struct.unpack(">H", rest[:2])[0]]
    except (IndexError, struct.error):
        return None
    found = dict(_subpackets(hashed)) | {
        k: v for k, v in _subpackets(unhashed) if k == _ISSUER_KEY_ID
    }
    fingerprint = found.get(_ISSUER_FINGERPRINT)
    if fingerprint and len(fingerprint) > 1:
        return fingerprint[1:].hex().upper()  # its first byte is the key's version
    key_id = found.get(_ISSUER_KEY_ID)
    return key_id.hex().upper() if key_id else None


def _first_packet(data: bytes) -> bytes | None:
    """The body of the first packet, if it is a signature packet (tag 2)."""
    head = data[0]
    if not head & 0x80:
        return None
    if head & 0x40:  # new format
        tag, length, start = head & 0x3F, data[1], 2
        if 192 <= length < 224:
            length, start = ((length - 192) << 8) + data[2] + 192, 3
        elif length == 255:
            length, start = struct.unpack(">I", data[2:6])[0], 6
    else:  # old format
        tag, kind = (head >> 2) & 0x0F, head & 0x03
        size = {0: 1, 1: 2, 2: 4}.get(kind)
        if size is None:
            return None
        length = int.from_bytes(data[1 : 1 + size], "big")
        start = 1 + size
    return data[start : start + length] if tag == 2 else None


def _subpackets(data: bytes) -> list[tuple[int, bytes]]:
    out = []
    i = 0
    while i < len(data):
        first = data[i]
        if first < 192:
            length, i = first, i + 1
        elif first < 255:
            length, i = ((first - 192) << 8) + data[i + 1] + 192, i + 2
        else:
            length, i = struct.unpack(">I", data[i + 1 : i + 5])[0], i + 5
        if length == 0 or i + length > len(data):
            break
        out.append((data[i] & 0x7F, data[i + 1 : i + length]))
        i += length
    return out
