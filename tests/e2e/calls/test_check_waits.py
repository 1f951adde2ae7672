"""A ``--check`` that leaves a process behind holding its output (``setsid``: out of the group the
timeout kills) does not hang applyonce: the output is read a bounded time after the kill."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from tests.conftest import Repo, apply
from tests.e2e.support import THREE_FILE_PATCH as PATCH


def test_a_check_whose_detached_child_holds_its_output_is_given_up(
    repo: Repo, tmp_path: Path
) -> None:
    pid_file = tmp_path / "daemon.pid"
    check = f"setsid sleep 120 & echo $! > {pid_file}; echo started"
    before = repo.head()
    started = time.monotonic()
    try:
        result = apply(repo, PATCH, "--check-timeout", "1", "--check", check)
    finally:
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert time.monotonic() - started < 20  # before: until the detached process exits
    assert result.returncode == 1, result.stderr
    assert (
        result.stderr.startswith("error: check ")
        and "[applyonce: killed after 1s]" in result.stderr
    )
    assert repo.head() == before and repo.call_ids() == []
