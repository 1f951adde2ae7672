"""``applyonce serve``'s life (docs/design.md §13): one server a repository, a stale socket
replaced, idle stop, start on demand only when asked, and every call it will not run exactly as
in process runs in process (or, with ``APPLYONCE_SERVE=require``, not at all)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Repo, make_repo, run_cli
from tests.e2e.serve.support import IN_PROCESS, LAUNCH, THROUGH, call, serving, start, stop

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
NO_SERVER = (
    "error: APPLYONCE_SERVE=require and no applyonce server took the call; start one with "
    "'applyonce serve', or unset APPLYONCE_SERVE\n"
)


def _socket(repo: Repo) -> Path:
    return repo.state_dir() / "serve.sock"


def _serve(
    repo: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "applyonce", "serve", "--repo", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def _wait_for(predicate, seconds: float = 20) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _server_pid(repo: Repo) -> int:
    return int((repo.state_dir() / "serve.lock").read_text())


def test_a_second_server_for_the_repository_says_another_serves_and_exits(repo: Repo) -> None:
    with serving(repo.path):
        second = _serve(repo.path)
        assert second.returncode == 0
        assert (
            second.stderr == f"applyonce serve: another server serves {repo.state_dir()} already\n"
        )
        assert call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH).returncode == 0


def test_a_stale_socket_is_passed_over_by_calls_and_replaced_by_the_next_server(repo: Repo) -> None:
    repo.state_dir().mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(_socket(repo)))
    stale.close()  # the file stays, nobody listens: a server that was killed
    alone = call("apply_patch", [PATCH], cwd=repo.path)
    assert (alone.returncode, alone.stderr) == (0, "")
    with serving(repo.path):
        again = call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH)
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith("Note: this patch was already applied")


def test_an_idle_server_stops_by_itself_and_removes_its_socket(repo: Repo) -> None:
    proc = start(repo.path, idle=0.5)
    try:
        assert proc.wait(timeout=30) == 0
        assert not _socket(repo).exists()
    finally:
        stop(proc)


def test_sigterm_stops_the_server_and_removes_its_socket(repo: Repo) -> None:
    proc = start(repo.path)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, proc.stderr.read()  # type: ignore[union-attr]
    assert not _socket(repo).exists()
    stop(proc)


def test_a_call_with_another_start_up_environment_runs_in_process(
    repo: Repo, tmp_path: Path
) -> None:
    base = repo.head()
    other = {"HOME": str(tmp_path / "another-home")}
    with serving(repo.path):
        refused = call("apply_patch", [PATCH], cwd=repo.path, env={**THROUGH, **other})
        assert (refused.returncode, refused.stdout, refused.stderr) == (3, "", NO_SERVER)
        assert repo.head() == base
        alone = call("apply_patch", [PATCH], cwd=repo.path, env=other)
        assert (alone.returncode, alone.stderr) == (0, "")
    assert repo.head() != base


def test_other_commands_run_in_process(repo: Repo) -> None:
    refused = call("applyonce", ["log", "--repo", str(repo.path)], env=THROUGH)
    assert refused.returncode == 0, refused.stderr


def test_no_server_no_start_unless_asked(repo: Repo) -> None:
    alone = call("apply_patch", [PATCH], cwd=repo.path)
    assert alone.returncode == 0
    time.sleep(1)
    assert not (repo.state_dir() / "serve.lock").exists()
    refused = call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH | {"APPLYONCE_SERVE": "0"})
    assert refused.returncode == 0
    assert not (repo.state_dir() / "serve.lock").exists()


@pytest.mark.parametrize("how", ["APPLYONCE_SERVE=1", "git config applyonce.serve true"])
def test_asked_a_call_starts_a_server_and_the_next_call_goes_through_it(
    repo: Repo, how: str
) -> None:
    env = {"APPLYONCE_SERVE": "1"} if how.startswith("APPLYONCE") else {}
    if not env:
        repo.git("config", "applyonce.serve", "true")
    first = call("apply_patch", [PATCH], cwd=repo.path, env=env)
    assert (first.returncode, first.stderr) == (0, "")
    try:
        assert _wait_for(lambda: _socket(repo).exists())
        through = call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH)
        assert through.returncode == 0, through.stderr
        assert through.stdout.startswith("Note: this patch was already applied")
    finally:
        _wait_for(lambda: (repo.state_dir() / "serve.lock").read_text().strip() != "")
        os.kill(_server_pid(repo), signal.SIGTERM)
        assert _wait_for(lambda: not _socket(repo).exists())


def test_a_socket_path_too_long_for_a_unix_socket_is_reached_through_its_folder(
    tmp_path: Path,
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    repo = make_repo(deep / "repo", {"src/util.py": "VALUE = 1\n"})
    assert len(str(_socket(repo))) > 108
    with serving(repo.path):
        through = call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH)
        assert (through.returncode, through.stderr) == (0, ""), through.stderr
    assert not _socket(repo).exists()


def test_serve_refuses_bad_input_in_one_line(tmp_path: Path, repo: Repo) -> None:
    outside = _serve(tmp_path / "nowhere")
    assert outside.returncode == 2
    assert outside.stderr.startswith("error: ") and outside.stderr.count("\n") == 1
    assert "not in a Git repository" in outside.stderr
    zero = _serve(repo.path, "--idle", "0")
    assert (zero.returncode, zero.stderr.count("\n")) == (2, 1)
    assert zero.stderr.startswith("error: --idle must be a positive number")
    repo.git("config", "applyonce.serveIdle", "soon")
    bad = _serve(repo.path)
    assert (bad.returncode, bad.stderr.count("\n")) == (2, 1)
    assert "applyonce.serveIdle" in bad.stderr and bad.stderr.startswith("error: ")
    assert not (repo.state_dir() / "serve.lock").exists()
    assert run_cli("log", "--repo", str(repo.path)).returncode == 0


def test_a_lock_file_made_a_symbolic_link_is_refused_and_its_target_left_alone(
    tmp_path: Path, repo: Repo
) -> None:
    """The server truncates its lock file and writes its pid there: a link planted in its place
    (by whoever can write the state folder) must not make it write to the file it names."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    repo.state_dir().mkdir(parents=True, exist_ok=True)
    lock = repo.state_dir() / "serve.lock"
    lock.symlink_to(victim)
    refused = _serve(repo.path, "--idle", "1")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr == (
        f"error: {lock} is a symbolic link, not the server's lock file; remove it (rm {lock}),"
        " then start the server again\n"
    )
    assert victim.read_text() == "keep me\n"
    assert lock.is_symlink() and not _socket(repo).exists()


def test_in_process_and_through_need_no_server_for_apply_patch_refusals(repo: Repo) -> None:
    alone = call("apply_patch", [], cwd=repo.path, env=IN_PROCESS)
    with serving(repo.path):
        through = call("apply_patch", [], cwd=repo.path, env=THROUGH)
    assert (through.returncode, through.stdout, through.stderr) == (
        alone.returncode,
        alone.stdout,
        alone.stderr,
    )
    assert alone.returncode == 2


def test_a_call_from_a_terminal_runs_in_process(repo: Repo) -> None:
    import pty

    leader, follower = pty.openpty()
    try:
        with serving(repo.path):
            for env, code in ((THROUGH, 3), ({}, 0)):
                proc = subprocess.run(
                    [sys.executable, "-c", LAUNCH.format("apply_patch_main"), PATCH],
                    cwd=repo.path,
                    stdin=subprocess.DEVNULL,
                    stdout=follower,
                    stderr=subprocess.PIPE,
                    env={**os.environ, **env},
                    timeout=60,
                    check=False,
                )
                assert proc.returncode == code, proc.stderr
                assert proc.stderr.decode() == (NO_SERVER if code else "")
    finally:
        os.close(leader)
        os.close(follower)
    assert len(repo.call_ids()) == 1


def _children(pid: int) -> set[int]:
    return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def test_a_call_is_run_by_the_spare_worker_forked_before_it(repo: Repo, tmp_path: Path) -> None:
    """The server forks the next call's worker between calls; the call is handed to it (no
    fork on the call's path), and another spare is forked for the call after."""
    parent = tmp_path / "parent"
    with serving(repo.path) as server:
        assert _wait_for(lambda: len(_children(server.pid)) == 1)
        (spare,) = _children(server.pid)
        run = call(
            "applyonce",
            ["apply", "-", "--check", f"echo $PPID > {parent}"],
            input=PATCH,
            cwd=repo.path,
            env=THROUGH,
        )
        assert run.returncode == 0, run.stderr
        assert int(parent.read_text()) == spare  # the check's shell is the worker's child
        assert _wait_for(lambda: spare not in _children(server.pid))
        assert _wait_for(lambda: len(_children(server.pid)) == 1)


def test_a_spare_worker_that_died_leaves_the_call_to_a_worker_forked_for_it(repo: Repo) -> None:
    with serving(repo.path) as server:
        assert _wait_for(lambda: len(_children(server.pid)) == 1)
        (spare,) = _children(server.pid)
        os.kill(spare, signal.SIGKILL)
        run = call("apply_patch", [PATCH], cwd=repo.path, env=THROUGH)
        assert run.returncode == 0, run.stderr
        assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
        assert _wait_for(lambda: len(_children(server.pid)) == 1)  # and a new spare


def test_a_stopped_server_leaves_no_spare_worker_behind(repo: Repo) -> None:
    proc = start(repo.path)
    assert _wait_for(lambda: len(_children(proc.pid)) == 1)
    (spare,) = _children(proc.pid)
    stop(proc)
    assert _wait_for(lambda: not Path(f"/proc/{spare}").exists())


def test_a_server_whose_applyonce_changed_under_it_runs_no_call_and_stops(
    repo: Repo, tmp_path: Path
) -> None:
    # A copy of the package of its own, first on the path of the server and of its clients, so
    # that the edit below reaches no other test's server.
    import applyonce

    site = tmp_path / "site"
    shutil.copytree(
        Path(applyonce.__file__).parent,
        site / "applyonce",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    own = {"PYTHONPATH": str(site)}
    source = site / "applyonce" / "adapters" / "cli" / "apply.py"
    info = source.stat()
    server = start(repo.path, env=own)
    try:
        through = call("apply_patch", [PATCH], cwd=repo.path, env={**THROUGH, **own})
        assert through.returncode == 0, through.stderr
        # an upgrade, or an edit in a development checkout
        os.utime(source, ns=(info.st_atime_ns, info.st_mtime_ns + 1_000_000_000))
        before = repo.head()
        again = PATCH.replace("-VALUE = 1\n+VALUE = 2", "-VALUE = 2\n+VALUE = 3")
        refused = call("apply_patch", [again], cwd=repo.path, env={**THROUGH, **own})
        assert (refused.returncode, refused.stdout, refused.stderr) == (3, "", NO_SERVER)
        assert repo.head() == before
        assert server.wait(timeout=30) == 0  # stopped by itself
        assert not _socket(repo).exists()
        here = call("apply_patch", [again], cwd=repo.path, env=own)
        assert here.returncode == 0, here.stderr
        assert repo.head() != before
    finally:
        stop(server)
