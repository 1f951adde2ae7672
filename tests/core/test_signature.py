"""What a commit's signature says about itself (applyonce.core.signature), and the trailers a
commit policy adds (applyonce.core.message.policy_trailers)."""

from __future__ import annotations

import base64
import hashlib
import struct

import pytest

from applyonce.core.message import policy_trailers
from applyonce.core.signature import describe


def _armor(kind: str, data: bytes, *, pgp: bool = False) -> str:
    body = base64.b64encode(data).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    head = [f"-----BEGIN {kind}-----", *([""] if pgp else [])]
    return "\n".join([*head, *lines, *(["=AbCd"] if pgp else []), f"-----END {kind}-----"]) + "\n"


def _pgp_signature(subpackets: bytes, unhashed: bytes = b"") -> bytes:
    body = (
        bytes([4, 0x00, 22, 8])
        + struct.pack(">H", len(subpackets))
        + subpackets
        + struct.pack(">H", len(unhashed))
        + unhashed
        + b"\x12\x34"  # the hash's first bytes, then the MPIs (none needed here)
    )
    return bytes([0xC2, len(body)]) + body


def test_an_openpgp_signature_names_its_issuer_fingerprint() -> None:
    fingerprint = bytes(range(20))
    issuer = bytes([len(fingerprint) + 2, 33, 4]) + fingerprint
    text = _armor("PGP SIGNATURE", _pgp_signature(issuer), pgp=True)
    assert describe(text) == ("openpgp", fingerprint.hex().upper())


def test_an_old_openpgp_signature_names_its_key_id() -> None:
    key_id = bytes.fromhex("8364DA648C01E81B")
    text = _armor("PGP SIGNATURE", _pgp_signature(b"", bytes([9, 16]) + key_id), pgp=True)
    assert describe(text) == ("openpgp", "8364DA648C01E81B")


def test_an_ssh_signature_names_its_public_key_fingerprint() -> None:
    key = b"\x00\x00\x00\x0bssh-ed25519" + b"\x00\x00\x00\x20" + bytes(32)
    blob = b"SSHSIG" + struct.pack(">I", 1) + struct.pack(">I", len(key)) + key
    expected = base64.b64encode(hashlib.sha256(key).digest()).decode().rstrip("=")
    assert describe(_armor("SSH SIGNATURE", blob)) == ("ssh", f"SHA256:{expected}")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", None),
        ("not a signature\n", None),
        ("-----BEGIN SIGNED MESSAGE-----\nMIAG\n-----END SIGNED MESSAGE-----\n", ("x509", None)),
        ("-----BEGIN SSH SIGNATURE-----\n!!!\n-----END SSH SIGNATURE-----\n", ("ssh", None)),
        ("-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----\n", ("openpgp", None)),
    ],
)
def test_a_signature_it_cannot_read_still_has_its_format(
    text: str, expected: tuple[str, str | None] | None
) -> None:
    assert describe(text) == expected


def test_policy_trailers_keep_the_callers_first_then_co_authors_then_the_sign_off() -> None:
    ann = "Ann <ann@example.invalid>"
    me = "Me <me@example.invalid>"
    assert policy_trailers([("Refs", "#1")], [ann, ann], me) == (
        ("Refs", "#1"),
        ("Co-authored-by", ann),
        ("Signed-off-by", me),
    )
    # A sign-off already last is not added twice (git commit -s); one earlier is.
    assert policy_trailers([("Signed-off-by", me)], [], me) == (("Signed-off-by", me),)
    assert policy_trailers([("Signed-off-by", me), ("Refs", "#1")], [], me)[-1] == (
        "Signed-off-by",
        me,
    )
    assert policy_trailers([], [], None) == ()
