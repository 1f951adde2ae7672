"""Every form of a connection string's password is masked wherever it appears in a text, and
nothing else is (the host, user, database and a passfile path stay readable)."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from applyonce.core.redaction import redact_secrets

SECRET = "s3cr3t"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("postgresql://agent:s3cr3t@db.internal/app", "postgresql://agent:***@db.internal/app"),
        ("postgres://agent:s3cr3t@x@db/app", "postgres://agent:***@db/app"),
        (
            "postgresql://agent@/app?host=/run/pg&password=s3cr3t",
            "postgresql://agent@/app?host=/run/pg&password=***",
        ),
        (
            "postgresql:///app?sslpassword=s3cr3t&sslmode=verify-full",
            "postgresql:///app?sslpassword=***&sslmode=verify-full",
        ),
        (
            "postgresql:///app?passfile=/home/a/.pgpass&password=s3cr3t",
            "postgresql:///app?passfile=/home/a/.pgpass&password=***",
        ),
        ("host=/tmp/x dbname=a user=u password=s3cr3t", "host=/tmp/x dbname=a user=u password=***"),
        ("host=/tmp/x password = s3cr3t dbname=a", "host=/tmp/x password = *** dbname=a"),
        ("host=/tmp/x password='s3cr3t and more' dbname=a", "host=/tmp/x password=*** dbname=a"),
        ("password='it\\'s s3cr3t' host=h", "password=*** host=h"),
        ("host=h passfile=/tmp/pf password=s3cr3t", "host=h passfile=/tmp/pf password=***"),
        (
            "argv: ['applyonce', '--ledger', 'host=h password=s3cr3t']",
            "argv: ['applyonce', '--ledger', 'host=h password=***']",
        ),
    ],
)
def test_each_form_of_a_password_is_masked(text: str, shown: str) -> None:
    assert redact_secrets(text) == shown
    assert SECRET not in redact_secrets(text)


@pytest.mark.parametrize(
    "text",
    [
        "git://127.0.0.1:9418/r.git",
        "ssh://git@host/team/app.git",
        "https://host/r?ref=main",
        "postgresql://agent@db.internal/app?sslmode=require",
        "host=/run/postgresql dbname=app user=agent passfile=/home/a/.pgpass",
    ],
)
def test_text_without_a_password_is_left_as_it_is(text: str) -> None:
    assert redact_secrets(text) == text


# A password as libpq reads one: unquoted (no space, quote or backslash), or quoted with ' and \
# escaped; a URL's, percent-encoded.
UNQUOTED = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E, blacklist_characters="'\\"), min_size=4
)
ANY = st.text(st.characters(blacklist_categories=["Cs", "Cc"]), min_size=4)


@given(UNQUOTED, ANY)
def test_no_password_survives_in_any_form(word: str, phrase: str) -> None:
    quoted = "'" + phrase.replace("\\", "\\\\").replace("'", "\\'") + "'"
    encoded = "".join(f"%{b:02X}" for b in phrase.encode())
    cases = [
        (word, f"host=h password={word} dbname=d"),
        (quote(word, safe=""), f"postgresql://u@h/d?password={quote(word, safe='')}"),
        (phrase, f"host=h password={quoted} dbname=d"),
        (encoded, f"postgresql://u:{encoded}@h/d"),
    ]
    for secret, text in cases:
        shown = redact_secrets(text)
        assert "***" in shown
        # (unless the secret is also some other part of the text, such as "host")
        assert secret not in shown.replace("***", "") or secret in text.replace(secret, "", 1)
