"""The resident server's pieces in process (docs/design.md §13): where a repository's server
listens, which calls a server refuses (the client then runs them itself), what the client reads of
the command line and the config, and that the client imports neither typer, pygit2 nor pydantic."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
