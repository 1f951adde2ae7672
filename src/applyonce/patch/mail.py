"""A ``git format-patch`` mail: the commit message and author it carries, as ``git am`` reads them.

A mail (``git format-patch`` output, or one message of an mbox) is a unified diff with mail
headers before it; ``unified.py`` reads its diff and skips the rest. This module reads the rest,
so the call's commit says what the mail says, as ``git am`` would commit it:

* **the message** — the ``Subject:`` (unfolded, RFC 2047 words decoded) without its leading
  ``[PATCH n/m]`` and ``Re:`` tags (git mailinfo's cleanup), then the body: every line after the
  headers up to the ``---`` line before the diffstat (or the diff itself). A last paragraph of
  ``Token: value`` trailers (``Signed-off-by:``) stays the message's last paragraph: it becomes
  the caller's trailers, before applyonce's ``Call-Id`` block, unless it names a token applyonce
  writes (then it stays in the body, where git does not read it as trailers).
* **the author** — ``From:`` (name and address) and ``Date:`` (time and zone), as ``git am``
  sets ``GIT_AUTHOR_*``; the committer stays the one running applyonce. An in-body ``From:`` or
  ``Date:`` line (first lines of the body, then a blank line: ``git format-patch`` writes it when
  the sender is not the author) overrides the header, as in ``git am``.

Neither is part of the call's identity (docs/design.md §3: a call is its patch): a repeat returns
the
first call's commit. ``--message`` given by the caller wins over the mail's.

**A series** (several mails in one text, an mbox) is refused with a hint, not applied as one
call: a call is one commit, and ``git am`` makes one commit per mail. Sent one mail per call, in
order, each is its own call, so a rerun of the series replays the mails already applied and goes
on with the next, exactly once each.

Pure: text in, fields out.
"""

from __future__ import annotations

import email.utils
import re
from dataclasses import dataclass
from email.header import decode_header, make_header
from email.parser import HeaderParser
from email.policy import compat32

from applyonce.errors import ApplyOnceError

# git format-patch's first line: "From <commit> Mon Sep 17 00:00:00 2001".
_MBOX_FROM = re.compile(r"^From [0-9a-f]{40} Mon Sep 17 00:00:00 2001$")
_ANY_MBOX_FROM = re.compile(r"^From \S+ .*\d{4}$")
_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*:")
_SUBJECT_TAG = re.compile(r"^\s*(?:(?:re|RE|Re|rE):\s*|\[[^\]]*\]\s*)")
_TRAILER = re.compile(r"^[A-Za-z0-9-]+: \S")


class MailSeriesError(ApplyOnceError):
    """The text holds several mails (``git format-patch`` series, an mbox)."""

    kind = "mail-series"
    default_hint = (
        "send each mail as its own call, in order (git format-patch writes one file per "
        'patch: for p in *.patch; do applyonce apply "$p" || break; done)'
    )


@dataclass(frozen=True)
class MailAuthor:
    """A mail's author as ``git am`` takes it: name, address, time (Unix seconds) and the zone's
    offset from UTC in minutes."""

    name: str
    email: str
    time: int | None  # None: the mail has no usable Date:, the commit is dated now
    offset: int


@dataclass(frozen=True)
class Mail:
    """What a mail says besides its diff: the commit message (subject, blank line, body), the
    trailers of its last paragraph, and its author (None without a usable ``From:``)."""

    message: str
    trailers: tuple[tuple[str, str], ...]
    author: MailAuthor | None


def read_mail(text: str, reserved: frozenset[str] = frozenset()) -> Mail | None:
    """The mail ``text`` is, or None when it is not one (no ``From:`` and ``Subject:`` header
    block at its start). ``reserved``: trailer tokens (lower case) that must stay in the body.

    Raises:
        MailSeriesError: the text holds more than one mail.
    """
    lines = text.replace("\r\n", "\n").split("\n")
    starts = [i for i, line in enumerate(lines) if _MBOX_FROM.match(line)]
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return None
    head = first + 1 if _ANY_MBOX_FROM.match(lines[first]) else first
    end = next((i for i in range(head, len(lines)) if not lines[i].strip()), len(lines))
    block = lines[head:end]
    if not block or not all(_HEADER.match(line) or line[:1] in " \t" for line in block):
        return None
    headers = HeaderParser(policy=compat32).parsestr("\n".join(block) + "\n\n")
    if headers["From"] is None or headers["Subject"] is None:
        return None
    subjects = sum(1 for line in lines if line.startswith("Subject: "))
    if len(starts) > 1 or subjects > 1:
        raise MailSeriesError(
            f"the text holds a series of {max(len(starts), subjects)} mails; one call applies "
            "one mail, as one commit"
        )
    body = lines[end + 1 :]
    subject = _decoded(headers["Subject"])
    author_field, date_field = _decoded(headers["From"]), headers["Date"]
    # In-body headers: "From:"/"Date:" lines that open the body, then a blank line.
    at = 0
    while at < len(body) and re.match(r"^(From|Date|Subject): ", body[at]):
        at += 1
    if at and (at == len(body) or not body[at].strip()):
        for line in body[:at]:
            key, _, value = line.partition(": ")
            if key == "From":
                author_field = value.strip()
            elif key == "Date":
                date_field = value.strip()
            else:
                subject = value.strip()
        body = body[at + 1 :]
    message, trailers = _message(subject, body, reserved)
    return Mail(message, trailers, _author(author_field, date_field))


def _decoded(value: str) -> str:
    """A header's text: unfolded, RFC 2047 encoded words decoded."""
    unfolded = re.sub(r"\r?\n[ \t]+", " ", value)
    try:
        return str(make_header(decode_header(unfolded))).strip()
    except (ValueError, LookupError, UnicodeDecodeError):
        return unfolded.strip()


def _message(
    subject: str, body: list[str], reserved: frozenset[str]
) -> tuple[str, tuple[tuple[str, str], ...]]:
    while (tag := _SUBJECT_TAG.match(subject)) and tag.end():
        subject = subject[tag.end() :]
    log: list[str] = []
    for line in body:
        # The log ends where the patch starts (git mailinfo): "---", a diff, an "Index:" line.
        if line.rstrip() == "---" or line.startswith(("diff -", "Index: ", "--- ")):
            break
        log.append(line.rstrip())
    while log and not log[-1]:
        log.pop()
    while log and not log[0]:
        log.pop(0)
    trailers: tuple[tuple[str, str], ...] = ()
    paragraph_start = max((i + 1 for i, line in enumerate(log) if not line), default=0)
    last = log[paragraph_start:]
    if paragraph_start and last and all(_TRAILER.match(line) for line in last):
        pairs = tuple(
            (token, value.strip()) for token, _, value in (line.partition(":") for line in last)
        )
        if not any(token.lower() in reserved for token, _ in pairs):
            trailers = pairs
            log = log[: paragraph_start - 1]
    body_text = "\n".join(log).strip("\n")
    subject = subject.strip() or "(no subject)"
    return subject + (f"\n\n{body_text}" if body_text else ""), trailers


def _author(from_field: str, date_field: str | None) -> MailAuthor | None:
    name, address = email.utils.parseaddr(from_field)
    if not address or "@" not in address:
        return None
    name = name.strip() or address.split("@", 1)[0]
    try:
        when = email.utils.parsedate_to_datetime((date_field or "").strip())
    except (TypeError, ValueError, IndexError):
        return MailAuthor(name=name, email=address, time=None, offset=0)
    offset = when.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    return MailAuthor(name=name, email=address, time=int(when.timestamp()), offset=minutes)
