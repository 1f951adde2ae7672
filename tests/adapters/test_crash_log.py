"""The crash log of an internal error (exit 3): the command line and the traceback it keeps
never hold a database password."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Repo

SECRET = "s3cr3t-Pw"


def test_the_crash_log_of_an_internal_error_keeps_no_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line and the traceback go to a crash log: the password of a --ledger
    connection string is masked in both, and in the line that names the log."""
    import typer

    from applyonce.adapters.console import error_boundary

    ledger = f"host=/run/pg dbname=fleet password='{SECRET} x'"
    monkeypatch.setattr("sys.argv", ["applyonce", "apply", "--ledger", ledger])
    with pytest.raises(typer.Exit), error_boundary():
        raise RuntimeError(f"driver said: could not use {ledger}")
    err = capsys.readouterr().err
    log = Path(err.split("details in ")[1].split(";")[0])
    try:
        text = log.read_text()
        assert "password=***" in text and SECRET not in text
        assert "host=/run/pg dbname=fleet" in text
        assert SECRET not in err
    finally:
        log.unlink()


@pytest.mark.parametrize(
    ("ledger", "password"),
    [
        ("host=/run/pg dbname=fleet password=x'hunter2SECRET", "x'hunter2SECRET"),
        ("host=/run/pg password='a\\'b secret' dbname=fleet", "a'b secret"),
        ("host=/run/pg password=a\\ b\\\\secret dbname=fleet", "a b\\secret"),
    ],
    ids=["quote-inside", "quoted-escaped-quote", "escaped-blank-and-backslash"],
)
def test_the_crash_log_masks_a_password_as_libpq_reads_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], ledger: str, password: str
) -> None:
    """The command line is kept as repr() shows it, which escapes quotes and backslashes: each
    of its words is masked before, as libpq reads it, and no piece of the password is left."""
    import typer

    from applyonce.adapters.console import error_boundary

    monkeypatch.setattr("sys.argv", ["applyonce", "mcp", "--ledger", ledger])
    with pytest.raises(typer.Exit), error_boundary():
        raise RuntimeError("boom")
    err = capsys.readouterr().err
    log = Path(err.split("details in ")[1].split(";")[0])
    try:
        argv = log.read_text().splitlines()[1]
        assert argv.startswith("argv: ['applyonce', 'mcp', '--ledger', ")
        assert "password=***" in argv and "host=/run/pg" in argv
        pieces = {password, repr(password)[1:-1], *re.split(r"[\s'\\]+", password)}
        assert [piece for piece in pieces if len(piece) > 2 and piece in argv] == []
    finally:
        log.unlink()


def test_the_mcp_server_failing_says_what_is_true_of_its_calls(repo: Repo) -> None:
    """The server cannot write its answers (standard output is a full device): exit 3, named
    by what failed (not the task group around it), and the advice fits the server: its calls
    ran to their end and are recorded; there is nothing for recover to finish."""
    hello = (
        '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        '"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}\n'
    )
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "applyonce", "mcp", "--repo", str(repo.path)],
            input=hello.encode(),
            stdout=full,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert err.startswith(
        "error: internal error: OSError: [Errno 28] No space left on device; details in "
    )
    assert err.endswith(
        "; the calls the server ran are recorded, and repeating one returns its result: "
        "start 'applyonce mcp' again, and report the log\n"
    )
    assert "recover" not in err
    Path(err.split("details in ")[1].split(";")[0]).unlink()
