"""One call, one commit: its message and trailers, its author, in a bare repository and as the
first commit of an unborn branch."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from tests.conftest import APP_PATCH as PATCH
from tests.conftest import Repo, apply, make_repo, run_cli


def test_apply_makes_one_commit_with_trailers_and_a_clean_checkout(repo: Repo) -> None:
    base = repo.head()
    result = apply(repo, PATCH, "--json", "--tool-call-id", "call_1")
    assert result.returncode == 0, result.stderr
    receipt = orjson.loads(result.stdout)
    assert receipt["status"] == "committed"
    assert repo.git("rev-parse", "HEAD~1").strip() == base
    assert receipt["commit"] == repo.head()
    trailers = repo.git("log", "-1", "--format=%(trailers)")
    assert f"Call-Id: {receipt['call_id']}" in trailers
    assert "Tool-Call-Id: call_1" in trailers
    assert "Tool-Version: applyonce-patch/2" in trailers
    parsed = repo.git("log", "-1", "--format=%(trailers:key=Args-Sha256,valueonly)").strip()
    assert parsed == receipt["args_sha256"]
    message = repo.git("log", "-1", "--format=%B")
    assert message.startswith("apply_patch: M src/app.py, A tests/test_app.py\n\n")
    # Receipt blob IDs are what git says they are.
    for record in receipt["files"]:
        assert record["blob"] == repo.git("rev-parse", f"HEAD:{record['path']}").strip()
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    assert repo.git("status", "--porcelain") == ""
    assert (
        repo.path / "src/app.py"
    ).read_text() == "def greet(name):\n    return f'hello {name}!'\n"


def test_trailers_parse_with_interpret_trailers(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    message = repo.git("log", "-1", "--format=%B")
    import subprocess

    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=message, capture_output=True, text=True
    ).stdout
    keys = [line.split(":")[0] for line in parsed.splitlines()]
    assert keys == ["Call-Id", "Contract-Sha256", "Attempt", "Tool", "Tool-Version", "Args-Sha256"]


def test_author_comes_from_repo_config_else_fallback(repo: Repo, tmp_path: Path) -> None:
    repo.git("config", "user.name", "Repo Person")
    repo.git("config", "user.email", "person@example.invalid")
    env = {
        k: ""
        for k in (
            "GIT_AUTHOR_NAME",
            "GIT_AUTHOR_EMAIL",
            "GIT_COMMITTER_NAME",
            "GIT_COMMITTER_EMAIL",
        )
    }
    clean_env = {k: v for k, v in os.environ.items() if k not in env}
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
        input=PATCH.encode(),
        env=clean_env,
        capture_output=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        repo.git("log", "-1", "--format=%an <%ae>").strip()
        == "Repo Person <person@example.invalid>"
    )


def test_bare_repository(tmp_path: Path) -> None:
    work = make_repo(
        tmp_path / "work", {"src/app.py": "def greet(name):\n    return 'hello ' + name\n"}
    )
    bare = tmp_path / "bare.git"
    work.git("clone", "-q", "--bare", str(work.path), str(bare))
    result = run_cli("apply", "-", "--repo", str(bare), "--branch", "main", input=PATCH)
    assert result.returncode == 0, result.stderr
    log = work.git("--git-dir", str(bare), "log", "--format=%s", "main")
    assert log.splitlines()[0] == "apply_patch: M src/app.py, A tests/test_app.py"
    assert (bare / "applyonce" / "ledger.sqlite3").is_file()


def test_unborn_branch_gets_its_first_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "empty")
    result = apply(repo, "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n")
    assert result.returncode == 0, result.stderr
    assert repo.commit_count() == 1
    assert (repo.path / "a.txt").read_text() == "a\n"
    assert repo.git("status", "--porcelain") == ""
