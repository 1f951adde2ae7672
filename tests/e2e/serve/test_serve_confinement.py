"""A call runs through ``applyonce serve`` only where its worker would be confined as the caller
is (docs/design.md §13): the caller's resource limits, no_new_privs, namespaces and ignored
signals, its own user's server, and none of the caller's files imported. Otherwise it runs in its
own process, as if no server ran (``APPLYONCE_SERVE=require``: not at all, exit 3)."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Repo, make_repo
from tests.e2e.serve.support import LAUNCH, THROUGH, call, serving

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
NO_SERVER = (
    "error: APPLYONCE_SERVE=require and no applyonce server took the call; start one with "
    "'applyonce serve', or unset APPLYONCE_SERVE\n"
)
ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (another user, a namespace)")
CLONE_NEWNET = 0x40000000
PR_SET_NO_NEW_PRIVS = 38


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _file_limit() -> None:
    resource.setrlimit(
        resource.RLIMIT_FSIZE, (1 << 30, resource.getrlimit(resource.RLIMIT_FSIZE)[1])
    )


def _open_files_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (512, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def _no_new_privs() -> None:
    assert _libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0


def _nohup() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


def _no_network() -> None:
    assert _libc().unshare(CLONE_NEWNET) == 0


def _run(
    args: list[str],
    repo: Path,
    *,
    env: dict[str, str],
    preexec: Callable[[], None] | None = None,
    stdin: bytes = b"",
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LAUNCH.format("applyonce_main"), *args],
        input=stdin.decode(),
        capture_output=True,
        text=True,
        cwd=repo,
        env={**os.environ, **env},
        preexec_fn=preexec,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    "confine",
    [
        _file_limit,
        _open_files_limit,
        _no_new_privs,
        _nohup,
        pytest.param(_no_network, marks=ROOT),
    ],
    ids=["ulimit -f", "ulimit -n", "no_new_privs", "nohup", "another network namespace"],
)
def test_a_caller_confined_otherwise_than_the_server_is_not_run_by_it(
    repo: Repo, confine: Callable[[], None]
) -> None:
    with serving(repo.path):
        before = repo.head()
        refused = _run(
            ["apply", "-"], repo.path, env=THROUGH, preexec=confine, stdin=PATCH.encode()
        )
        assert (refused.returncode, refused.stdout, refused.stderr) == (3, "", NO_SERVER)
        assert repo.head() == before
        assert repo.git("status", "--porcelain") == ""
        taken = _run(["apply", "-"], repo.path, env=THROUGH, stdin=PATCH.encode())
        assert taken.returncode == 0, taken.stderr
        assert repo.head() != before


def test_a_check_sees_the_callers_resource_limit_with_a_server_as_without(
    tmp_path: Path,
) -> None:
    if resource.getrlimit(resource.RLIMIT_FSIZE)[0] != resource.RLIM_INFINITY:
        pytest.skip("the file size is limited already")
    args = ["apply", "-", "--check", 'test "$(ulimit -f)" != unlimited']
    results = []
    for name, serve in (("alone", False), ("served", True)):
        repo = make_repo(tmp_path / name, {"src/util.py": "VALUE = 1\n"})
        before = repo.head()
        if serve:
            with serving(repo.path):
                run = _run(args, repo.path, env={}, preexec=_file_limit, stdin=PATCH.encode())
        else:
            run = _run(
                args,
                repo.path,
                env={"APPLYONCE_SERVE": "0"},
                preexec=_file_limit,
                stdin=PATCH.encode(),
            )
        results.append((run.returncode, repo.head() != before))
    assert results == [(0, True), (0, True)]


def test_a_nohup_call_through_the_server_ignores_its_hang_up_as_in_process(repo: Repo) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "applyonce", "serve", "--repo", str(repo.path), "--idle", "120"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        preexec_fn=_nohup,
    )
    try:
        assert server.stderr is not None
        assert server.stderr.readline().startswith(b"applyonce serve: listening on ")
        patch = repo.path.parent / "patch.txt"
        patch.write_text(PATCH)
        before = repo.head()
        client = subprocess.Popen(
            [
                sys.executable,
                "-c",
                LAUNCH.format("applyonce_main"),
                "apply",
                "-",
                "--check",
                "sleep 2",
            ],
            stdin=patch.open("rb"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=repo.path,
            env={**os.environ, **THROUGH},
            preexec_fn=_nohup,
        )
        time.sleep(1)  # the worker runs the check
        client.send_signal(signal.SIGHUP)  # the terminal that started it closed
        _, err = client.communicate(timeout=60)
        assert client.returncode == 0, err
        assert repo.head() != before
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        server.stderr.close()  # type: ignore[union-attr]


_SHADOW = """import os
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "imported.txt"), "w").close()
raise ImportError("a module of the repository's, not the standard library's")
"""


def test_a_server_a_call_starts_imports_nothing_from_the_callers_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"src/util.py": "VALUE = 1\n", "selectors.py": _SHADOW})
    script = tmp_path / "bin" / "apply_patch"  # as a console script: its own folder on sys.path
    script.parent.mkdir()
    script.write_text(
        "from applyonce.adapters.launch import apply_patch_main\napply_patch_main()\n"
    )
    first = subprocess.run(
        [sys.executable, str(script), PATCH],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env={**os.environ, "APPLYONCE_SERVE": "1"},
        timeout=60,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    sock = repo.state_dir() / "serve.sock"
    marker = repo.path / "imported.txt"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (sock.exists() or marker.exists()):
        time.sleep(0.05)
    lock = repo.state_dir() / "serve.lock"
    try:
        assert not marker.exists()
        assert sock.exists()
    finally:
        if lock.exists() and lock.read_text().strip():
            os.kill(int(lock.read_text()), signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and sock.exists():
        time.sleep(0.05)


_IMPOSTOR = """import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
server.listen(1)  # the credentials a client sees: nobody's
print("ready", flush=True)
conn, _ = server.accept()
conn.settimeout(5)
try:
    os.write(out, conn.recv(1 << 20))
except OSError:
    pass
conn.sendall(b"P1\\nX0\\n")  # "a worker ran the call, and it succeeded"
conn.close()
"""


@ROOT
def test_a_socket_another_user_listens_on_gets_nothing_and_says_nothing(
    repo: Repo, tmp_path: Path
) -> None:
    repo.state_dir().mkdir(parents=True, exist_ok=True)
    log = tmp_path / "received"
    impostor = subprocess.Popen(
        [sys.executable, "-c", _IMPOSTOR, str(repo.state_dir() / "serve.sock"), str(log)],
        stdout=subprocess.PIPE,
    )
    try:
        assert impostor.stdout is not None
        assert impostor.stdout.readline() == b"ready\n"
        before = repo.commit_count()
        run = call("apply_patch", [PATCH], cwd=repo.path, env={"SECRET_TOKEN": "s3cr3t"})
        assert run.returncode == 0, run.stderr
        assert repo.commit_count() == before + 1  # it ran here, in process
    finally:
        impostor.kill()
        impostor.wait(timeout=30)
        impostor.stdout.close()  # type: ignore[union-attr]
    assert b"s3cr3t" not in log.read_bytes()


def test_a_worker_that_finds_another_folder_at_the_callers_path_runs_nothing(repo: Repo) -> None:
    from applyonce.adapters import rendezvous

    argv = ["apply_patch", PATCH]
    encoded = rendezvous.encode_request(
        "apply_patch", argv, str(repo.path), 0o022, dict(os.environb)
    )
    fields = encoded[8:].split(b"\0")
    assert fields[5] == rendezvous.identity(str(repo.path))
    fields[5] = b"0:0"  # the folder the caller was in is no longer the one at its path
    body = b"\0".join(fields)
    with serving(repo.path):
        before = repo.head()
        read, write = os.pipe()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(repo.state_dir() / "serve.sock"))
            fds = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (write, write, write))
            conn.sendmsg(
                [len(body).to_bytes(8, "big") + body], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
            )
            os.close(write)
            conn.settimeout(20)
            answer = b""
            while chunk := conn.recv(100):
                answer += chunk
            assert answer == b""  # no worker took the call: the client runs it itself
            assert os.read(read, 100) == b""  # and wrote nothing
        finally:
            conn.close()
            os.close(read)
        assert repo.head() == before
