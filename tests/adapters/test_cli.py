"""The ``apply`` command's options and the read-only commands through the real CLI: ``--dry-run``,
``--protect`` without a terminal, ``--state-dir``, ``show`` and ``log``, a folder that is no
repository."""

from __future__ import annotations

from pathlib import Path

import orjson

from tests.conftest import APP_PATCH as PATCH
from tests.conftest import Repo, apply, run_cli


def test_dry_run_writes_nothing(repo: Repo) -> None:
    result = apply(repo, PATCH, "--dry-run")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("dry run: call ")
    assert lines[1].split() == ["update", "src/app.py", "[match:", "exact]"]
    assert lines[2].split() == ["add", "tests/test_app.py"]
    assert not repo.state_dir().exists()
    assert repo.commit_count() == 1


def test_show_and_log(repo: Repo) -> None:
    receipt = orjson.loads(apply(repo, PATCH, "--json").stdout)
    shown = run_cli("show", receipt["call_id"][:10], "--repo", str(repo.path))
    assert shown.returncode == 0
    assert f"call      {receipt['call_id']}" in shown.stdout
    assert "status    committed (exit 0)" in shown.stdout
    logged = run_cli("log", "--repo", str(repo.path))
    assert receipt["call_id"][:12] in logged.stdout and "committed" in logged.stdout
    missing = run_cli("show", "abcdef0", "--repo", str(repo.path))
    assert missing.returncode == 2 and missing.stderr.startswith("error: no call 'abcdef0'")


def test_protected_path_needs_approval(repo: Repo) -> None:
    result = apply(repo, PATCH, "--protect", "src/*")
    assert result.returncode == 1
    assert "needs approval" in result.stderr
    assert repo.commit_count() == 1
    unprotected = apply(repo, PATCH, "--protect", "docs/*")
    assert unprotected.returncode == 0


def test_not_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("apply", "-", "--repo", str(tmp_path), input=PATCH)
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "not inside a Git repository" in result.stderr
    assert "Traceback" not in result.stderr


def test_state_dir_option(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert apply(repo, PATCH, "--state-dir", str(state)).returncode == 0
    assert (state / "ledger.sqlite3").is_file()
    assert not repo.state_dir().exists()
