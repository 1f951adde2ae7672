"""How the CLI ends on odd input or a signal: a one-line error and a usage exit code, or 130/143
with the running check killed and nothing committed."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply

pytestmark = pytest.mark.sampled(every=2, by="module")


def test_odd_inputs_get_one_line_errors(repo: Repo, tmp_path: Path) -> None:
    cases = [
        (("--attempt", "99999999999999999999999"), 2),
        (("--check-timeout", "-1"), 2),
        (("--state-dir", "/dev/null/x"), 2),
    ]
    for args, code in cases:
        result = apply(repo, PATCH, *args)
        assert result.returncode == code, (args, result)
        assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    deep = "*** Begin Patch\n*** Add File: x.toml\n+a = " + "[" * 50_000 + "\n*** End Patch\n"
    result = apply(repo, deep)
    assert result.returncode == 1 and "x.toml" in result.stderr


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)]
)
def test_interrupting_a_check_kills_it(repo: Repo, tmp_path: Path, sig: int, code: int) -> None:
    marker = tmp_path / "marker"
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "applyonce",
            "apply",
            "-",
            "--repo",
            str(repo.path),
            "--check",
            f"touch {started}; sleep 2; touch {marker}",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # As from a terminal: a suite started with SIGINT ignored (a shell's 'pytest &') would
        # hand that on, and an ignored Ctrl-C interrupts nothing.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    proc.stdin.write(PATCH.encode())  # type: ignore[union-attr]
    proc.stdin.close()  # type: ignore[union-attr]
    # Signal once the check runs, not after a fixed delay: a loaded machine may still be
    # importing the interpreter after a second, before applyonce's handlers exist.
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert started.exists(), "the check never started"
    proc.send_signal(sig)
    assert proc.wait(timeout=30) == code
    time.sleep(2.0)
    assert not marker.exists()
    assert repo.commit_count() == 1
