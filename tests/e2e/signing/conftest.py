"""The signing tests' keys (tests/support/signing.py)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.signing import Keys, make_keys

KeysOf = Callable[[str], Keys]


@pytest.fixture
def keys_of(monkeypatch: pytest.MonkeyPatch) -> Iterator[KeysOf]:
    """``keys_of(fmt)``: a fresh key of that format; its GNUPGHOME is this test's (the git and
    applyonce processes it starts inherit it). Short paths: gpg-agent's socket lives there."""
    homes: list[Path] = []

    def make(fmt: str) -> Keys:
        home = Path(tempfile.mkdtemp(prefix="ao-sign-", dir="/tmp"))
        home.chmod(0o700)
        homes.append(home)
        if fmt in ("openpgp", "x509"):
            monkeypatch.setenv("GNUPGHOME", str(home))
        return make_keys(fmt, home)

    yield make
    for home in homes:
        # The gpg-agent this test's gpg started (its GNUPGHOME names it), then its keys.
        subprocess.run(
            ["gpgconf", "--kill", "all"],
            env={"GNUPGHOME": str(home), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            check=False,
        )
        shutil.rmtree(home, ignore_errors=True)
