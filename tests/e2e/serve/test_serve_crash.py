"""Exactly once through ``applyonce serve`` (docs/design.md §13): the crash matrix with every call
through a server — the process running the call SIGKILLed at every fault point, then ``recover``,
then a repeat — and the server, the client, or both killed in the middle of a call."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.conftest import Repo, run_cli
from tests.e2e.crash.test_recovery import COMMIT_POINTS, crash_recover_repeat
from tests.e2e.serve.support import LAUNCH, THROUGH, serving
from tests.e2e.support import THREE_FILE_PATCH, assert_invariants


@pytest.fixture
def served(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[bytes]]:
    """A server for ``repo``; every ``apply`` of the test goes through it (or exits 3)."""
    for key, value in THROUGH.items():
        monkeypatch.setenv(key, value)
    with serving(repo.path) as server:
        yield server
        assert server.poll() is None  # a killed call did not take the server with it


# .ci/run kills at one point in six, others at the next commits (tests/conftest.py).
@pytest.mark.sampled(every=6)
@pytest.mark.parametrize("point", COMMIT_POINTS)
def test_killed_at_a_fault_point_through_the_server_then_recover_then_repeat(
    repo: Repo, served: subprocess.Popen[bytes], point: str
) -> None:
    crash_recover_repeat(repo, point)


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return []
    return [int(p) for p in text.split()]


def _slow_call(repo: Repo) -> subprocess.Popen[bytes]:
    """An ``apply`` through the server whose check runs 3 s."""
    patch = repo.path.parent / "three-files.patch"
    patch.write_text(THREE_FILE_PATCH)
    with patch.open("rb") as stdin:
        return subprocess.Popen(
            [
                sys.executable,
                "-c",
                LAUNCH.format("applyonce_main"),
                "apply",
                "-",
                "--repo",
                str(repo.path),
                "--json",
                "--check",
                "sleep 3",
            ],
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )


def _worker_of(server: subprocess.Popen[bytes]) -> int:
    """The server's worker, once it runs the call's check."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for worker in _children(server.pid):
            if _children(worker):  # the check runs
                return worker
        time.sleep(0.02)
    raise AssertionError("no worker ran the check")


def _gone(pid: int) -> None:
    deadline = time.monotonic() + 30
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        if Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z"):
            return
        time.sleep(0.02)


def _repeat_replays(repo: Repo, call_id: str) -> None:
    again = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=THREE_FILE_PATCH)
    assert again.returncode == 0, again.stderr
    receipt = orjson.loads(again.stdout)
    assert (receipt["call_id"], receipt["replayed"]) == (call_id, True)


def test_the_server_killed_mid_call_the_call_completes_and_says_so(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.head()
    monkeypatch.setenv("APPLYONCE_SERVE", "require")
    with serving(repo.path) as server:
        client = _slow_call(repo)
        _worker_of(server)
        server.kill()
        out, err = client.communicate(timeout=60)
    assert client.returncode == 0, err
    receipt = orjson.loads(out)
    assert receipt["status"] == "committed"
    assert_invariants(repo, base, receipt["call_id"], committed=True)
    _repeat_replays(repo, receipt["call_id"])


def test_the_server_and_its_worker_killed_mid_call_the_client_says_unknown_never_committed(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.head()
    monkeypatch.setenv("APPLYONCE_SERVE", "require")
    with serving(repo.path) as server:
        client = _slow_call(repo)
        worker = _worker_of(server)
        server.kill()
        os.kill(worker, signal.SIGKILL)
        out, err = client.communicate(timeout=60)
    assert client.returncode == 5
    assert out == b""
    assert err.decode().endswith(
        "error: the applyonce server stopped during the call, which may or may not have "
        "committed; run 'applyonce recover', then repeat the call (a committed call replays)\n"
    )
    assert "committed\n" not in err.decode().splitlines()
    assert repo.head() == base
    monkeypatch.setenv("APPLYONCE_SERVE", "0")
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    again = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=THREE_FILE_PATCH)
    assert again.returncode == 0, again.stderr
    assert_invariants(repo, base, orjson.loads(again.stdout)["call_id"], committed=True)


def test_the_client_killed_mid_call_the_call_completes_and_a_repeat_replays(
    repo: Repo, served: subprocess.Popen[bytes]
) -> None:
    base = repo.head()
    client = _slow_call(repo)
    worker = _worker_of(served)
    client.kill()
    client.communicate(timeout=30)
    assert client.returncode == -signal.SIGKILL
    _gone(worker)
    call_ids = repo.call_ids()
    assert len(call_ids) == 1
    assert_invariants(repo, base, call_ids[0], committed=True)
    _repeat_replays(repo, call_ids[0])
    assert repo.call_ids() == call_ids


def test_ctrl_c_reaches_the_worker_which_ends_as_an_interrupted_call(
    repo: Repo, served: subprocess.Popen[bytes]
) -> None:
    base = repo.head()
    client = _slow_call(repo)
    _worker_of(served)
    client.send_signal(signal.SIGINT)
    _out, err = client.communicate(timeout=60)
    assert client.returncode == 130, err
    assert repo.head() == base
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    again = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=THREE_FILE_PATCH)
    assert again.returncode == 0, again.stderr
    assert_invariants(repo, base, orjson.loads(again.stdout)["call_id"], committed=True)
