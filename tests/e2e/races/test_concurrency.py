"""Races between real processes: one call many times, and many calls on one branch."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import orjson

from tests.conftest import NEW_FILE_PATCH as ADD
from tests.conftest import Repo, apply, make_repo


def _spawn(repo: Path, patch: str, *args: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo), "--json", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(os.environ),
    )
    assert proc.stdin is not None
    proc.stdin.write(patch.encode())
    proc.stdin.close()
    return proc


def _files(n: int) -> dict[str, str]:
    return {f"mod{i}.py": f"VALUE_{i} = 0\n" for i in range(n)}


def test_eight_processes_one_call_make_one_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", _files(1))
    patch = (
        "*** Begin Patch\n*** Update File: mod0.py\n@@\n-VALUE_0 = 0\n+VALUE_0 = 1\n*** End Patch\n"
    )
    procs = [_spawn(repo.path, patch) for _ in range(8)]
    results = [(p.wait(timeout=60), p.stdout.read(), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    codes = sorted(code for code, _, _ in results)
    assert set(codes) <= {0, 4}, results
    assert 0 in codes
    for code, out, err in results:
        assert b"Traceback" not in err
        if code == 4:
            assert err.startswith(b"error: call ") and b"is running in process" in err
        else:
            assert orjson.loads(out)["status"] == "committed"
    assert repo.commit_count() == 2
    assert len(repo.call_ids()) == 1
    assert repo.git("status", "--porcelain") == ""


def test_eight_processes_eight_patches_all_land_linearly(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", _files(8))
    base = repo.head()
    patches = [
        f"*** Begin Patch\n*** Update File: mod{i}.py\n@@\n-VALUE_{i} = 0\n+VALUE_{i} = {i + 1}\n"
        f"*** Add File: new{i}.txt\n+{i}\n*** End Patch\n"
        for i in range(8)
    ]
    procs = [_spawn(repo.path, patch) for patch in patches]
    results = [(p.wait(timeout=90), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    assert [code for code, _ in results] == [0] * 8, results
    history = repo.git("rev-list", "--first-parent", f"{base}..HEAD").split()
    assert len(history) == 8
    assert repo.git("rev-list", "--merges", "HEAD") == ""
    assert len(set(repo.call_ids())) == 8
    files = repo.files()
    for i in range(8):
        assert files[f"mod{i}.py"] == f"VALUE_{i} = {i + 1}\n".encode()
        assert files[f"new{i}.txt"] == f"{i}\n".encode()
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("fsck", "--strict", "--no-dangling") == ""


def test_restage_on_moved_tip_that_no_longer_applies_is_a_conflict(repo: Repo) -> None:
    # Simulated by a commit made between two calls on the same lines: the second call's context
    # is gone, so it is rejected as a hunk mismatch (staged on the new tip from the start).
    from tests.conftest import run_cli

    one = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
    )
    two = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 3\n*** End Patch\n"
    )
    assert run_cli("apply", "-", "--repo", str(repo.path), input=one).returncode == 0
    result = run_cli("apply", "-", "--repo", str(repo.path), input=two)
    assert result.returncode == 1
    assert "src/util.py: hunk 1: expected lines not found" in result.stderr


def test_overlapping_executions_with_separate_state_land_once(repo: Repo, tmp_path: Path) -> None:
    slow = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "applyonce",
            "apply",
            "-",
            "--repo",
            str(repo.path),
            "--state-dir",
            str(tmp_path / "a"),
            "--check",
            "sleep 2",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    slow.stdin.write(ADD.encode())  # type: ignore[union-attr]
    slow.stdin.close()  # type: ignore[union-attr]
    time.sleep(0.8)
    fast = apply(repo, ADD, "--state-dir", str(tmp_path / "b"))
    assert fast.returncode == 0
    assert slow.wait(timeout=60) == 0
    assert len(repo.call_ids()) == 1
