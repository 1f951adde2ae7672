"""A Ctrl-C (or SIGTERM) that comes while a ``--check`` process starts is held until the call
holds the process, then handled where it kills the check's process group: raised inside
``Popen`` it would leave the check running, with no one to kill it."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from applyonce.flow.call.checks import _signals_held, run_command


@pytest.fixture(autouse=True)
def _ctrl_c_raises() -> Iterator[None]:
    """Ctrl-C raises KeyboardInterrupt here, as in a terminal, also when the suite was started
    with SIGINT ignored (a shell's background job, ``pytest &``: Python then keeps it ignored)."""
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, saved)


def test_a_signal_while_a_check_starts_is_held_then_raised() -> None:
    before = signal.getsignal(signal.SIGINT)
    with _signals_held() as held:
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt here
    assert held == [signal.SIGINT]
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(held[0])


def test_a_signal_held_while_the_check_failed_to_start_is_not_lost() -> None:
    with pytest.raises(KeyboardInterrupt), _signals_held():
        os.kill(os.getpid(), signal.SIGINT)
        raise OSError("no shell")


def test_a_check_interrupted_as_it_starts_is_killed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Ctrl-C comes as ``Popen`` returns (the check already runs): the check's process group
    is killed before the interruption goes on."""
    import subprocess

    marker = tmp_path / "marker"
    real = subprocess.Popen

    def started_then_interrupted(*args: object, **kwargs: object) -> subprocess.Popen[bytes]:
        proc = real(*args, **kwargs)  # type: ignore[call-overload]
        os.kill(os.getpid(), signal.SIGINT)
        return proc  # type: ignore[no-any-return]

    monkeypatch.setattr(subprocess, "Popen", started_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_command(f"sleep 1; touch {marker}", cwd=tmp_path, changed=[], timeout=30)
    monkeypatch.undo()
    real(["sleep", "1.5"]).wait()
    assert not marker.exists()
