"""Secrets in text that applyonce shows or keeps: a database password never leaves the process.

A ledger's connection string may be given in either libpq form, and both may hold a password:

* a URL: ``postgresql://user:PASSWORD@host/db``, and ``?password=PASSWORD`` (or
  ``sslpassword``) in its query;
* ``key=value`` words: ``host=/run/pg dbname=app password=PASSWORD``, a value quoted with
  ``'…'`` and ``\\'`` inside it when it holds spaces.

:func:`redact_secrets` replaces each such password with ``***`` wherever it appears in a text —
a message, a traceback, the command line written to a crash log — and leaves everything else as
it was (the host, the user, the database, a ``passfile`` path: what the reader needs to find
the database). It is applied to every text that may carry a connection string: the refusal of a
ledger, the driver's errors, the crash log. Pure.
"""

from __future__ import annotations

import re

MASK = "***"
# scheme://user:PASSWORD@ — the password runs to the last '@' of the authority.
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:@/\s?#]*:)[^\s/?#]*@")
# ?password=…&  (a URL's query; percent-encoded or not)
_QUERY_PASSWORD = re.compile(r"(?i)(?P<head>[?&](?:ssl)?password=)[^&#\s]*")
# password=… as a libpq key=value word: quoted ('a b\'c'), or up to the next space or quote
# (one not escaped cannot be part of an unquoted value).
_WORD_PASSWORD = re.compile(
    r"(?i)(?P<head>(?<![\w.&?])(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|(?:[^\s'\\]|\\.)+)"
)


def redact_secrets(text: str) -> str:
    """``text`` with every password of a connection string in it replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", text)
    text = _QUERY_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)
    return _WORD_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)
