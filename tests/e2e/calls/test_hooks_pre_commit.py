"""The real ``pre-commit`` framework (PyPI) installed as the repository's hooks, with a real
``.pre-commit-config.yaml`` of local hooks (no network): a fixer that rewrites files, a check that
fails, a commit-msg rule — through the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pre_commit  # noqa: F401  (the 'test' extra installs it: missing, the suite fails)
import pytest

from tests.conftest import UTIL_PATCH, Repo, apply, make_repo

CONFIG = r"""repos:
- repo: local
  hooks:
  - id: trailing-whitespace
    name: strip trailing whitespace
    entry: sed -i -e 's/[ \t]*$//'
    language: system
    types: [text]
  - id: no-fixme
    name: no FIXME
    entry: FIXME
    language: pygrep
    types: [text]
  - id: ticket
    name: the message names a ticket
    entry: 'OPS-[0-9]+'
    language: pygrep
    args: [--negate]
    stages: [commit-msg]
"""
SPACES_PATCH = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2   \n*** End Patch\n"
)
FIXME_PATCH = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2  # FIXME\n"
    "*** End Patch\n"
)


@pytest.fixture
def hooked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    monkeypatch.setenv("PRE_COMMIT_HOME", str(tmp_path / "pre-commit-home"))
    repo = make_repo(
        tmp_path / "repo",
        {"src/util.py": "VALUE = 1\n", ".pre-commit-config.yaml": CONFIG},
    )
    subprocess.run(
        [sys.executable, "-m", "pre_commit", "install", "-t", "pre-commit", "-t", "commit-msg"],
        cwd=repo.path,
        check=True,
        capture_output=True,
    )
    return repo


def user_state(repo: Repo) -> tuple[object, ...]:
    git_dir = repo.path / ".git"
    return (repo.files(), (git_dir / "index").read_bytes(), repo.git("for-each-ref"))


def test_a_fixer_hook_fails_the_call_with_the_diff_it_wanted(hooked: Repo) -> None:
    before = user_state(hooked)
    done = apply(hooked, SPACES_PATCH, "--json", "-m", "OPS-1 bump VALUE")
    assert done.returncode == 1, done.stderr
    receipt = orjson.loads(done.stdout)
    assert receipt["error"]["kind"] == "hook-modified-files"
    assert receipt["error"]["paths"] == ["src/util.py"]
    assert "-VALUE = 2   \n+VALUE = 2\n" in receipt["error"]["hook_diff"]
    # The framework's own words are there too: which hook, and that it changed files.
    assert "strip trailing whitespace" in receipt["output"]
    assert "files were modified by this hook" in receipt["output"]
    assert user_state(hooked) == before
    fixed = apply(hooked, SPACES_PATCH.replace("   \n", "\n"), "-m", "OPS-1 bump VALUE")
    assert fixed.returncode == 0, fixed.stderr
    assert hooked.git("show", "HEAD:src/util.py") == "VALUE = 2\n"


def test_a_failing_check_rejects_with_the_frameworks_output(hooked: Repo) -> None:
    before = user_state(hooked)
    done = apply(hooked, FIXME_PATCH, "-m", "OPS-2 note")
    assert done.returncode == 1
    first = done.stderr.splitlines()[0]
    assert first.startswith("error: the repository's pre-commit hook refused the commit (exit 1)")
    assert "output of the pre-commit hook:" in done.stderr
    assert "no FIXME" in done.stderr and "src/util.py:1:VALUE = 2  # FIXME" in done.stderr
    assert user_state(hooked) == before


def test_a_commit_msg_rule_reads_the_message_applyonce_writes(hooked: Repo) -> None:
    refused = apply(hooked, UTIL_PATCH, "-m", "bump VALUE")
    assert refused.returncode == 1
    assert "the repository's commit-msg hook refused the commit" in refused.stderr
    assert "the message names a ticket" in refused.stderr
    done = apply(hooked, UTIL_PATCH, "--json", "-m", "OPS-3 bump VALUE", "--attempt", "2")
    assert done.returncode == 0, done.stderr
    names = [c["name"] for c in orjson.loads(done.stdout)["checks"]]
    assert names[-2:] == ["hook:pre-commit", "hook:commit-msg"]
    assert hooked.git("log", "-1", "--format=%s") == "OPS-3 bump VALUE\n"


def test_no_verify_skips_the_framework(hooked: Repo) -> None:
    done = apply(hooked, FIXME_PATCH, "--json", "--no-verify")
    assert done.returncode == 0, done.stderr
    receipt = orjson.loads(done.stdout)
    assert receipt["no_verify"] is True
    assert not [c for c in receipt["checks"] if c["name"].startswith("hook:")]
