"""A real ``applyonce serve`` for a test's repository, and calls through it or in process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import Run

LAUNCH = "from applyonce.adapters.launch import {0}; {0}()"
THROUGH = {"APPLYONCE_SERVE": "require"}  # through a server, or exit 3
IN_PROCESS = {"APPLYONCE_SERVE": "0"}


@contextmanager
def serving(
    repo: Path, *, idle: float = 120, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``applyonce serve --repo REPO`` running (its socket bound) for the block, then stopped."""
    proc = start(repo, idle=idle, env=env)
    try:
        yield proc
    finally:
        stop(proc)


def start(
    repo: Path, *, idle: float = 120, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "applyonce", "serve", "--repo", str(repo), "--idle", str(idle)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **(env or {})},
    )
    assert proc.stderr is not None
    line = proc.stderr.readline().decode()
    assert line.startswith("applyonce serve: listening on "), line + proc.stderr.read().decode()
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert proc.stderr is not None
    proc.stderr.close()


def call(
    kind: str,
    args: list[str],
    *,
    input: str | bytes = b"",
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 60,
) -> Run:
    """``applyonce ARGS`` or ``apply_patch ARGS`` through the console scripts' first step."""
    entry = "applyonce_main" if kind == "applyonce" else "apply_patch_main"
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH.format(entry), *args],
        input=input.encode() if isinstance(input, str) else input,
        capture_output=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        check=False,
    )
    return Run(proc.returncode, proc.stdout.decode(), proc.stderr.decode())
