"""The resident server's pieces in process (docs/design.md §13): where a repository's server
listens, which calls a server refuses (the client then runs them itself), what the client reads of
the command line and the config, and that the client imports neither typer, pygit2 nor pydantic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from applyonce.adapters import launch, rendezvous, resident
from tests.conftest import Repo, make_repo
from tests.e2e.serve.support import LAUNCH, THROUGH, serving

PATCH = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"


def test_every_worktree_and_subfolder_of_a_repository_shares_its_common_git_dir(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"src/util.py": "VALUE = 1\n"})
    repo.git("worktree", "add", "-q", "-b", "side", str(tmp_path / "linked"))
    common = str((repo.path / ".git").resolve())
    assert rendezvous.common_dir(str(repo.path / "src")) == common
    assert rendezvous.common_dir(str(tmp_path / "linked")) == common
    bare = make_repo(tmp_path / "bare.git", bare=True)
    assert rendezvous.common_dir(str(bare.path)) == str(bare.path.resolve())
    assert rendezvous.common_dir(str(tmp_path)) is None


def test_a_long_state_folder_is_reached_through_its_descriptor() -> None:
    assert rendezvous.socket_address("/short", 7) == "/short/serve.sock"
    long = "/" + "d" * 120
    assert rendezvous.socket_address(long, 7) == "/proc/self/fd/7/serve.sock"


def test_a_request_round_trips() -> None:
    env = {b"HOME": b"/h", b"ODD": b"a=b", b"EMPTY": b""}
    encoded = rendezvous.encode_request("apply_patch", ["apply_patch", "é", ""], "/w", 0o027, env)
    request = rendezvous.Request(encoded[8:])
    assert int.from_bytes(encoded[:8], "big") == len(encoded) - 8
    assert (request.kind, request.argv, request.cwd, request.umask) == (
        "apply_patch",
        ["apply_patch", "é", ""],
        "/w",
        0o027,
    )
    assert request.environ == env
    with pytest.raises(ValueError, match="not an applyonce-serve request"):
        rendezvous.Request(b"something else")


def _request(env: dict[bytes, bytes], *, kind: str = "applyonce") -> rendezvous.Request:
    return rendezvous.Request(rendezvous.encode_request(kind, ["applyonce"], "/", 0o22, env)[8:])


def test_the_server_refuses_what_it_cannot_run_as_the_client_would(tmp_path: Path) -> None:
    server = resident._Server(str(tmp_path), -1, 60)
    same = dict(os.environb)
    assert server._refusal(os.getuid(), _request(same)) == b""
    assert server._refusal(os.getuid() + 1, _request(same)) == b"another user"
    assert server._refusal(os.getuid(), None) == b"no request"
    assert server._refusal(os.getuid(), _request(same, kind="recover")) == b"another command"
    for key in (b"HOME", b"LANG", b"LC_ALL", b"PYTHONHASHSEED", b"GIT_CONFIG_GLOBAL", b"TZ"):
        assert server._refusal(os.getuid(), _request({**same, key: b"other"})) == (
            b"another start-up environment"
        ), key
    # What a call reads when it runs goes with the call.
    for key in (b"APPLYONCE_FAULT", b"GIT_DIR", b"APPLYONCE_TOOL_CALL_ID", b"PATH"):
        assert server._refusal(os.getuid(), _request({**same, key: b"other"})) == b"", key
    other = _request(same)
    other.compatibility = b"0.0.1|/elsewhere|python|3.9|()"
    assert server._refusal(os.getuid(), other) == b"another applyonce or Python"
    confined = _request(same)
    confined.confinement = confined.confinement.replace(b"NoNewPrivs:\t0", b"NoNewPrivs:\t1")
    assert confined.confinement != server.confinement
    assert server._refusal(os.getuid(), confined) == b"another confinement"


@pytest.mark.parametrize(
    ("args", "found"),
    [
        (["-", "--repo", "r"], "r"),
        (["-", "--repo=r"], "r"),
        (["-C", "r", "-"], "r"),
        (["-Cr"], "r"),
        (["-", "--", "--repo", "r"], None),
        (["-"], None),
    ],
)
def test_the_client_finds_the_repository_option(args: list[str], found: str | None) -> None:
    assert launch._repo_option(args) == found


@pytest.mark.parametrize(
    ("config", "on"),
    [
        ("[applyonce]\n\tserve = true\n", True),
        ("[applyonce]\n\tserve\n", True),
        ("[ApplyOnce]\n\tServe = yes ; a comment\n", True),
        ("[applyonce]\n\tserve = false\n", False),
        ("[applyonce]\n\tserveIdle = 5\n", False),
        ("[core]\n\tserve = true\n", False),
        ("", False),
    ],
)
def test_the_client_reads_applyonce_serve_from_the_repository_config(
    tmp_path: Path, config: str, on: bool
) -> None:
    (tmp_path / "config").write_text(config)
    assert launch._config_on(str(tmp_path)) is on


def test_a_call_through_the_server_imports_neither_typer_nor_pygit2_nor_pydantic(
    repo: Repo,
) -> None:
    with serving(repo.path):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", LAUNCH.format("apply_patch_main"), PATCH],
            cwd=repo.path,
            capture_output=True,
            text=True,
            env={**os.environ, **THROUGH},
            timeout=60,
            check=False,
        )
    assert proc.returncode == 0, proc.stderr
    imported = [line.split("|")[-1].strip() for line in proc.stderr.splitlines() if "|" in line]
    assert "applyonce.adapters.launch" in imported
    heavy = [m for m in imported if m.split(".")[0] in ("typer", "pygit2", "pydantic", "click")]
    assert heavy == []


# The client's path through a server, in an interpreter without the site module (so that no .pth
# file imports anything first): what it imports beyond the interpreter's own start.
_BARE_CLIENT = """
import os, sys
before = set(sys.modules)
real_exit = os._exit
def counted_exit(code):
    print(" ".join(sorted(set(sys.modules) - before)))
    sys.stdout.flush()
    real_exit(code)
os._exit = counted_exit
from applyonce.adapters import launch
launch.through_server("apply_patch", ["apply_patch", "PATCH"])
"""


def test_a_call_through_the_server_imports_no_module_of_the_standard_library(
    repo: Repo,
) -> None:
    """No typing, re, enum, signal or contextlib: a bare ``import re`` costs the client as much
    again as the interpreter's whole start."""
    import socket
    import threading

    state = repo.state_dir()
    state.mkdir(parents=True, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dir_fd = os.open(state, os.O_RDONLY | os.O_DIRECTORY)
    try:
        listener.bind(rendezvous.socket_address(str(state), dir_fd))
    finally:
        os.close(dir_fd)
    listener.listen(1)

    def answer() -> None:  # a server that ran the call: a worker took it, and it exited 0
        conn, _ = listener.accept()
        with conn:
            _, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
            for _, _, payload in ancillary:
                for i in range(0, len(payload) - len(payload) % 4, 4):
                    os.close(int.from_bytes(payload[i : i + 4], sys.byteorder))
            conn.sendall(b"P%d\nX0\n" % os.getpid())

    thread = threading.Thread(target=answer)
    thread.start()
    try:
        src = str(Path(launch.__file__).parents[2])
        proc = subprocess.run(
            [sys.executable, "-S", "-c", _BARE_CLIENT],
            cwd=repo.path,
            capture_output=True,
            text=True,
            env={**os.environ, **THROUGH, "PYTHONPATH": src},
            stdin=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    finally:
        thread.join(timeout=60)
        listener.close()
    assert proc.returncode == 0, proc.stderr
    imported = set(proc.stdout.split())
    assert {"applyonce.adapters.launch", "_socket"} <= imported
    ours = {"applyonce", "applyonce.adapters", "applyonce.adapters.launch"}
    assert imported - ours <= {"applyonce.adapters.rendezvous", "_socket", "__future__"}


def test_a_worker_runs_its_command_line_without_building_it_again(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server builds the typer app's click commands and the options' converters once
    (``prebuild``); a call then builds neither the command line nor a converter."""
    import signal

    import typer.core
    import typer.main

    from applyonce.adapters import cli

    monkeypatch.setattr(cli, "_prebuilt", None)  # restored after the test
    monkeypatch.setattr(signal, "signal", lambda *args: None)  # main's SIGTERM handler
    cli.prebuild("apply", "revert")
    built: list[str] = []
    monkeypatch.setattr(typer.main, "get_command", lambda *a: built.append("command"))
    real_converter = typer.core.build_runtime_param

    def converter(*args: Any) -> Any:
        built.append("converter")
        return real_converter(*args)

    monkeypatch.setattr(typer.core, "build_runtime_param", converter)
    patch = repo.path.parent / "edit.patch"
    patch.write_text(PATCH)
    monkeypatch.setattr(sys, "argv", ["applyonce", "apply", str(patch), "-C", str(repo.path)])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 0, capsys.readouterr()
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert built == []
