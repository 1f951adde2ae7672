"""``--check`` commands: a failing one rejects and keeps its output, a passing one ran in a
scratch checkout of the new tree, a slow one times out."""

from __future__ import annotations

import orjson

from tests.conftest import APP_PATCH as PATCH
from tests.conftest import Repo, apply


def test_failing_check_rejects_and_keeps_its_output(repo: Repo) -> None:
    before = repo.files()
    head = repo.head()
    check = "echo checking $APPLYONCE_CHANGED_FILES; grep -q 'hello {name}!' src/app.py && exit 3"
    result = apply(repo, PATCH, "--json", "--check", check)
    assert result.returncode == 1
    receipt = orjson.loads(result.stdout)
    assert receipt["error"]["kind"] == "check-failed"
    user_check = next(c for c in receipt["checks"] if c["name"] == check)
    assert user_check["exit_code"] == 3
    # The check ran on the staged tree and saw the changed files.
    assert "checking src/app.py tests/test_app.py" in user_check["output_tail"].replace("\n", " ")
    assert repo.head() == head and repo.files() == before


def test_passing_check_runs_in_scratch_checkout_of_new_tree(repo: Repo) -> None:
    check = 'test -f tests/test_app.py && python3 -c \'import src.app as a; assert a.greet("x") == "hello x!"\''
    result = apply(repo, PATCH, "--json", "--check", check)
    assert result.returncode == 0, result.stderr
    receipt = orjson.loads(result.stdout)
    assert [c["exit_code"] for c in receipt["checks"]] == [0, 0, 0]
    # The scratch checkout lives in the state dir, not in the user's work tree.
    assert (repo.state_dir() / "scratch" / "0" / "tests" / "test_app.py").is_file()
    assert repo.git("status", "--porcelain") == ""


def test_check_timeout_rejects(repo: Repo) -> None:
    result = apply(repo, PATCH, "--json", "--check", "sleep 30", "--check-timeout", "0.5")
    assert result.returncode == 1
    receipt = orjson.loads(result.stdout)
    assert "timed out" in receipt["error"]["message"]
    assert receipt["checks"][-1]["exit_code"] is None
