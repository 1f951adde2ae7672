"""The resident server's tests start their processes as a terminal would: with the stop signals
at their defaults. A suite run under ``nohup`` or as a shell's background job ignores SIGHUP or
SIGINT, and every process it starts would inherit that (an ignored signal stays ignored across
``exec``): a Ctrl-C sent to a client would then be ignored, and the server's confinement check,
which compares the ignored signals of client and server, would see no difference to refuse."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def stop_signals_at_their_defaults() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)}
    signal.signal(signal.SIGINT, signal.default_int_handler)  # SIG_DFL in a child, after exec
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)
