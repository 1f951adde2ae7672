"""The crash log of an internal error (exit 3): the command line and the traceback it keeps
never hold a database password."""

from __future__ import annotations

from pathlib import Path

import pytest

SECRET = "s3cr3t-Pw"


def test_the_crash_log_of_an_internal_error_keeps_no_password(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command line and the traceback go to a crash log: the password of a --ledger
    connection string is masked in both, and in the line that names the log."""
    import typer

    from applyonce.console import error_boundary

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
