"""Reading a ``git format-patch`` mail's message and author (``patch/mail.py``); the commits it
makes are checked against the real ``git am`` in tests/e2e/calls/test_mail_cli.py."""

from __future__ import annotations

import pytest

from applyonce.patch.mail import MailAuthor, MailSeriesError, read_mail

DIFF = "diff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-a\n+b\n"
MAIL = (
    "From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n"
    "From: =?UTF-8?q?Zo=C3=AB?= <zoe@example.org>\n"
    "Date: Mon, 6 May 2024 07:08:09 +0200\n"
    "Subject: [PATCH v2 1/2] Re: fix a\n"
    "\n"
    "Body line.\n"
    "\n"
    "Signed-off-by: Zoë <zoe@example.org>\n"
    "---\n a | 2 +-\n\n" + DIFF + "-- \n2.39.5\n"
)


def test_a_mail_gives_its_message_trailers_and_author() -> None:
    mail = read_mail(MAIL)
    assert mail is not None
    assert mail.message == "fix a\n\nBody line."
    assert mail.trailers == (("Signed-off-by", "Zoë <zoe@example.org>"),)
    assert mail.author == MailAuthor("Zoë", "zoe@example.org", 1714972089, 120)


@pytest.mark.parametrize(
    "text", [DIFF, "Some commit message\n\n" + DIFF, "*** Begin Patch\n*** End Patch\n", ""]
)
def test_text_that_is_not_a_mail_is_none(text: str) -> None:
    assert read_mail(text) is None


def test_a_last_paragraph_with_a_reserved_token_stays_in_the_body() -> None:
    mail = read_mail(MAIL.replace("Signed-off-by: Zoë", "Call-Id: Zoë"), frozenset({"call-id"}))
    assert mail is not None and mail.trailers == ()
    assert mail.message.endswith("Body line.\n\nCall-Id: Zoë <zoe@example.org>")


def test_a_mail_without_a_date_is_dated_now() -> None:
    mail = read_mail(MAIL.replace("Date: Mon, 6 May 2024 07:08:09 +0200\n", ""))
    assert mail is not None and mail.author is not None and mail.author.time is None


def test_two_mails_are_a_series() -> None:
    with pytest.raises(MailSeriesError, match="a series of 2 mails"):
        read_mail(MAIL + "\n" + MAIL)
