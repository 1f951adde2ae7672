"""Which branch a call lands on: a symbolic branch means its target, a mistyped one is no new one."""

from __future__ import annotations

import orjson

from tests.conftest import NEW_FILE_PATCH as ADD
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, apply


def test_symbolic_branch_means_its_target(repo: Repo) -> None:
    repo.git("symbolic-ref", "refs/heads/alias", "refs/heads/main")
    result = apply(repo, PATCH, "--branch", "alias", "--json")
    assert result.returncode == 0, result.stderr
    assert orjson.loads(result.stdout)["ref"] == "refs/heads/main"


def test_a_mistyped_branch_is_a_usage_error_not_a_new_branch(repo: Repo) -> None:
    result = apply(repo, ADD, "--branch", "nope")
    assert result.returncode == 2
    assert result.stderr.startswith("error: there is no branch 'nope'")
    assert repo.git("branch", "--list", "nope") == ""
