"""What ``applyonce serve`` holds open (docs/design.md §13): none of a caller's descriptors once
its call ended or was refused (a caller's reader waits for the end of its pipe), none of the
descriptors of the call that started it, and no more after many calls than before them."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Repo
from tests.e2e.serve.support import LAUNCH, THROUGH, call, serving

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"


def _descriptors(pid: int) -> list[str]:
    """What the server holds once its last call's worker is reaped (with that worker's
    connection) and the spare worker for the next call is forked: one child. The socket to the
    spare is a new one after each call, so sockets are counted, not named."""
    deadline = time.monotonic() + 10
    children = Path(f"/proc/{pid}/task/{pid}/children")
    while time.monotonic() < deadline and len(children.read_text().split()) != 1:
        time.sleep(0.05)
    time.sleep(0.2)
    held = (os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd"))
    return sorted(re.sub(r"^socket:\[\d+\]$", "socket", name) for name in held)


def _ended(read: int, seconds: float) -> bool:
    """The pipe's every write end is closed (its reader sees the end within ``seconds``)."""
    ready, _, _ = select.select([read], [], [], seconds)
    return bool(ready) and os.read(read, 1) == b""


@pytest.mark.parametrize("request_", ["another protocol", "a client that stops sending"])
def test_a_request_the_server_cannot_read_leaves_none_of_the_clients_descriptors_open(
    repo: Repo, request_: str
) -> None:
    with serving(repo.path) as server:
        first = call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH)
        assert first.returncode == 0, first.stderr
        held = _descriptors(server.pid)
        read, write = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(repo.state_dir() / "serve.sock"))
            if request_ == "another protocol":
                body = b"applyonce-serve/0\0something else"
                data = len(body).to_bytes(8, "big") + body
            else:
                data = (1000).to_bytes(8, "big") + b"applyonce-serve/"
            fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (write, write, write))
            conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
            os.close(write)
            conn.settimeout(20)
            assert conn.recv(100) == b""  # at once, or after the server's wait for the rest
            assert _ended(read, 5)
        finally:
            conn.close()
            os.close(read)
        assert _descriptors(server.pid) == held
        again = call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH)
        assert again.returncode == 0, again.stderr


def test_many_calls_leave_the_server_holding_what_it_held(repo: Repo) -> None:
    with serving(repo.path) as server:
        first = call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH)
        assert first.returncode == 0, first.stderr
        held = _descriptors(server.pid)
        for n in range(1, 21):
            patch = PATCH.replace("VALUE = 2", f"VALUE = {n + 2}").replace(
                "-VALUE = 1", f"-VALUE = {n + 1}"
            )
            run = call("apply_patch", [patch], cwd=repo.path, env=THROUGH)
            assert run.returncode == 0, run.stderr
        assert _descriptors(server.pid) == held


def test_a_server_a_call_starts_holds_none_of_the_callers_descriptors(
    repo: Repo, tmp_path: Path
) -> None:
    read, write = os.pipe()
    sock = repo.state_dir() / "serve.sock"
    lock = repo.state_dir() / "serve.lock"
    try:
        first = subprocess.run(
            [sys.executable, "-c", LAUNCH.format("apply_patch_main"), PATCH],
            cwd=repo.path,
            capture_output=True,
            env={**os.environ, "APPLYONCE_SERVE": "1"},
            pass_fds=(write,),  # a harness's pipe, say, that it reads to its end
            timeout=60,
            check=False,
        )
        os.close(write)
        assert first.returncode == 0, first.stderr
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not sock.exists():
            time.sleep(0.05)
        assert sock.exists()
        assert _ended(read, 10)  # not the server's idle minute
    finally:
        os.close(read)
        if lock.exists() and lock.read_text().strip():
            os.kill(int(lock.read_text()), signal.SIGTERM)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and sock.exists():
            time.sleep(0.05)
