"""Secrets in text that applyonce shows or keeps: a database password never leaves the process.

A ledger's connection string may be given in either libpq form, and both may hold a password:

* a URL: ``postgresql://user:PASSWORD@host/db``, and ``?password=PASSWORD`` (or
  ``sslpassword``) in its query;
* ``key=value`` words: ``host=/run/pg dbname=app password=PASSWORD``. The value is read as
  libpq reads it (``conninfo_parse``): after the ``=`` and any blanks, a value that starts with
  ``'`` runs to the next ``'`` not escaped by a backslash; any other value runs to the next ASCII
  blank not escaped by a backslash, quotes and all (``password=x'y`` is the password ``x'y``).

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
# password=… as a libpq key=value word (module docstring). Blanks are the ASCII ones libpq's
# isspace() sees; a backslash escapes the character after it (any one, a blank too), and one at
# the very end is dropped; an unterminated quoted value is masked to the end of the text.
_BLANKS = r" \t\n\v\f\r"
_ESCAPED = r"\\[\s\S]?"
_QUOTED = rf"'(?:[^'\\]|{_ESCAPED})*'?"
_UNQUOTED = rf"(?:[^'\\{_BLANKS}]|{_ESCAPED})(?:[^\\{_BLANKS}]|{_ESCAPED})*"
_WORD_PASSWORD = re.compile(
    rf"(?i)(?P<head>(?<![\w.&?])(?:ssl)?password[{_BLANKS}]*=[{_BLANKS}]*)"
    rf"(?:{_QUOTED}|{_UNQUOTED})?"
)


def redact_secrets(text: str) -> str:
    """``text`` with every password of a connection string in it replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}@", text)
    text = _QUERY_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)
    return _WORD_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)
