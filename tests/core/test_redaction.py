"""Every form of a connection string's password is masked wherever it appears in a text, and
nothing else is (the host, user, database and a passfile path stay readable)."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from psycopg.conninfo import conninfo_to_dict

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
        # Unquoted, a quote inside the value is part of it; a backslash escapes a blank.
        ("host=h password=x's3cr3t dbname=a", "host=h password=*** dbname=a"),
        ("host=h password=x\\ s3cr3t dbname=a", "host=h password=*** dbname=a"),
        ("password=\\'s3cr3t host=h", "password=*** host=h"),
        # After '=' libpq skips blanks: the password here is 's3cr3t=1'.
        ("host=h password= s3cr3t=1", "host=h password= ***"),
        ("host=h password='a\\'s3cr3t x' dbname=a", "host=h password=*** dbname=a"),
        ("host=h passfile=/tmp/pf password=s3cr3t", "host=h passfile=/tmp/pf password=***"),
        # Quoted by a message: libpq would read the closing quote as part of the value, and so
        # the mask takes it too (a crash log masks each word of the command line before repr()).
        (
            "cannot use 'host=h password=s3cr3t' now",
            "cannot use 'host=h password=*** now",
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


# What libpq reads: any text but NUL, as UTF-8; biased towards what its parser treats specially.
PASSWORD = st.text(
    st.one_of(
        st.sampled_from(list("'\\ \t\n\v\f\r=@:/?&#%\"")),
        st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"),
    ),
    min_size=1,
)


def quoted(password: str) -> str:
    return "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"


def escaped(password: str) -> str:
    """Unquoted: every backslash and ASCII blank escaped, and a leading quote."""
    text = re.sub(r"[\\ \t\n\v\f\r]", lambda m: "\\" + m[0], password)
    return "\\" + text if text.startswith("'") else text


def bare(password: str) -> str:
    """Unquoted as it is, when libpq reads it so: no blank, no backslash, no leading quote."""
    assume(not re.search(r"[\\ \t\n\v\f\r]", password) and not password.startswith("'"))
    return password


def url(password: str) -> str:
    return f"postgresql://u:{quote(password, safe='')}@h/d"


def query(password: str) -> str:
    return f"postgresql://u@h/d?password={quote(password, safe='')}&sslmode=disable"


def words(value: Callable[[str], str], before: str, after: str) -> Callable[[str], str]:
    return lambda password: f"host=h {after}password{before}={after}{value(password)} dbname=d"


FORMS = {
    "quoted": words(quoted, "", ""),
    "quoted-blanks": words(quoted, " ", "\t "),
    "escaped": words(escaped, "", ""),
    "escaped-blanks": words(escaped, "\t", "  "),
    "bare": words(bare, "", ""),
    "bare-blanks": words(bare, " ", "\n"),
    "url": url,
    "query": query,
}


@given(PASSWORD, st.sampled_from(sorted(FORMS)))
def test_the_mask_covers_the_password_exactly_as_libpq_reads_it(password: str, form: str) -> None:
    text = FORMS[form](password)
    read = conninfo_to_dict(text)
    assert read["password"] == password  # the text is a connection string with this password
    masked = redact_secrets(text)
    # libpq reads the masked text as the same connection string, with the password "***":
    # the mask covered the value, all of it and nothing else.
    assert conninfo_to_dict(masked) == {**read, "password": "***"}
    rest = masked.replace("***", "")
    assert password not in rest or password in FORMS[form]("\x01").replace("\x01", "")
