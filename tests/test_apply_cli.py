"""The executor end to end: real ``applyonce`` processes against real repositories."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.conftest import Repo, make_repo, run_cli

PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def greet(name):
-    return 'hello ' + name
+    return f'hello {name}!'
*** Add File: tests/test_app.py
+from src.app import greet
+assert greet('x') == 'hello x!'
*** End Patch
"""


def apply(repo: Repo, patch: str, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=patch, env=env)


def receipt_of(repo: Repo, call_id: str) -> dict:  # type: ignore[type-arg]
    return orjson.loads((repo.state_dir() / "receipts" / f"{call_id}.json").read_bytes())


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
    assert (repo.path / "src/app.py").read_text() == "def greet(name):\n    return f'hello {name}!'\n"


def test_trailers_parse_with_interpret_trailers(repo: Repo) -> None:
    assert apply(repo, PATCH).returncode == 0
    message = repo.git("log", "-1", "--format=%B")
    import subprocess

    parsed = subprocess.run(
        ["git", "interpret-trailers", "--parse"], input=message, capture_output=True, text=True
    ).stdout
    keys = [line.split(":")[0] for line in parsed.splitlines()]
    assert keys == ["Call-Id", "Contract-Sha256", "Attempt", "Tool", "Tool-Version", "Args-Sha256"]


def test_same_call_twice_makes_one_commit_and_identical_output(repo: Repo) -> None:
    first = apply(repo, PATCH, "--json")
    second = apply(repo, PATCH, "--json")
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout  # the stored receipt, byte for byte
    assert repo.commit_count() == 2
    text_first = apply(repo, PATCH)
    assert text_first.stdout == "Success. Updated the following files:\nM src/app.py\nA tests/test_app.py\n"
    assert repo.commit_count() == 2


@pytest.mark.parametrize(
    "spelling",
    [
        "apply_patch <<'EOF'\n" + PATCH + "EOF\n",
        PATCH.replace("\n", "\r\n"),
        PATCH.replace("*** Update File: src/app.py", "  *** Update File: ./src//app.py  "),
        PATCH.replace("*** Begin Patch", " *** Begin Patch ").rstrip("\n"),
    ],
    ids=["heredoc", "crlf", "padded-and-dot-slash", "padded-markers-no-final-newline"],
)
def test_equivalent_spelling_is_the_same_call(repo: Repo, spelling: str) -> None:
    first = apply(repo, PATCH, "--json")
    again = apply(repo, spelling, "--json")
    assert again.returncode == 0, again.stderr
    assert orjson.loads(again.stdout)["call_id"] == orjson.loads(first.stdout)["call_id"]
    assert again.stdout == first.stdout
    assert repo.commit_count() == 2


def test_new_attempt_is_a_new_call(repo: Repo) -> None:
    add = "*** Begin Patch\n*** Add File: notes.txt\n+note\n*** End Patch\n"
    first = orjson.loads(apply(repo, add, "--json").stdout)
    # Someone changes the file, so the same patch changes something again.
    (repo.path / "notes.txt").write_text("edited\n")
    repo.git("commit", "-qam", "edit notes")
    second_run = apply(repo, add, "--json", "--attempt", "2")
    assert second_run.returncode == 0, second_run.stderr
    second = orjson.loads(second_run.stdout)
    assert second["call_id"] != first["call_id"]
    assert second["attempt"] == 2
    assert repo.call_ids() == [second["call_id"], first["call_id"]]


def test_a_patch_that_changes_nothing_is_refused_not_an_empty_commit(repo: Repo) -> None:
    add = "*** Begin Patch\n*** Add File: notes.txt\n+note\n*** End Patch\n"
    assert apply(repo, add).returncode == 0
    head = repo.head()
    again = apply(repo, add, "--attempt", "2")  # the file already is what the patch makes it
    assert again.returncode == 1
    assert again.stderr.startswith("error: the patch changes nothing") and again.stderr.count("\n") == 1
    assert repo.head() == head


def test_contract_changes_the_call(repo: Repo, tmp_path: Path) -> None:
    contract = tmp_path / "contract.md"
    contract.write_text("do the thing\n")
    add = "*** Begin Patch\n*** Add File: notes.txt\n+note\n*** End Patch\n"
    one = orjson.loads(apply(repo, add, "--json").stdout)
    two = orjson.loads(apply(repo, add, "--json", "--contract", str(contract)).stdout)
    assert one["call_id"] != two["call_id"]
    import hashlib

    assert two["contract_sha256"] == hashlib.sha256(b"do the thing\n").hexdigest()


def test_idempotency_key_reused_with_other_args_is_a_conflict(repo: Repo) -> None:
    add = "*** Begin Patch\n*** Add File: notes.txt\n+note\n*** End Patch\n"
    other = "*** Begin Patch\n*** Add File: notes.txt\n+other\n*** End Patch\n"
    first = apply(repo, add, "--idempotency-key", "run7-step3")
    assert first.returncode == 0
    head = repo.head()
    again = apply(repo, add, "--idempotency-key", "run7-step3", "--attempt", "5")
    assert again.returncode == 0 and repo.head() == head  # same key, same args: replay
    clash = apply(repo, other, "--idempotency-key", "run7-step3")
    assert clash.returncode == 4
    assert clash.stderr.startswith("error: idempotency key 'run7-step3' was already used")
    assert clash.stderr.count("\n") == 1
    assert repo.head() == head
    assert "Idempotency-Key: run7-step3" in repo.git("log", "-1", "--format=%(trailers)")


def test_failing_hunk_in_third_file_rejects_everything(repo: Repo) -> None:
    before = repo.files()
    head = repo.head()
    patch = """*** Begin Patch
*** Add File: new.txt
+new
*** Update File: src/util.py
@@
-VALUE = 1
+VALUE = 2
*** Update File: src/app.py
@@
-    return 'goodbye ' + name
+    return 'bye'
*** End Patch
"""
    result = apply(repo, patch, "--json")
    assert result.returncode == 1
    receipt = orjson.loads(result.stdout)
    assert receipt["status"] == "rejected"
    assert receipt["commit"] is None
    assert receipt["error"]["kind"] == "hunk-mismatch"
    assert receipt["error"]["path"] == "src/app.py"
    assert receipt["error"]["hunk"] == 1
    assert receipt["error"]["expected"] == ["    return 'goodbye ' + name"]
    assert repo.head() == head
    assert repo.files() == before
    text = apply(repo, patch)
    assert text.returncode == 1
    assert text.stderr.startswith("error: src/app.py: hunk 1: expected lines not found")
    assert text.stderr.count("\n") == 1


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
    check = "test -f tests/test_app.py && python3 -c 'import src.app as a; assert a.greet(\"x\") == \"hello x!\"'"
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


def test_builtin_syntax_check_rejects_broken_python(repo: Repo) -> None:
    head = repo.head()
    patch = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = (1\n*** End Patch\n"
    result = apply(repo, patch)
    assert result.returncode == 1
    assert "builtin:syntax" in result.stderr and "src/util.py:1" in result.stderr
    assert repo.head() == head


def test_builtin_check_rejects_conflict_markers_and_bad_json(repo: Repo) -> None:
    markers = (
        "*** Begin Patch\n*** Update File: README.md\n@@\n # demo\n+<<<<<<< HEAD\n+a\n+=======\n"
        "+b\n+>>>>>>> other\n*** End Patch\n"
    )
    result = apply(repo, markers)
    assert result.returncode == 1 and "conflict" in result.stderr
    bad_json = "*** Begin Patch\n*** Add File: data.json\n+{\"a\": 1,}\n*** End Patch\n"
    result = apply(repo, bad_json)
    assert result.returncode == 1 and "data.json" in result.stderr
    assert repo.commit_count() == 1


def test_dirty_path_is_a_conflict_and_user_work_survives(repo: Repo) -> None:
    (repo.path / "src/app.py").write_text("my own edit\n")
    head = repo.head()
    result = apply(repo, PATCH)
    assert result.returncode == 4
    assert result.stderr.startswith("error: src/app.py has uncommitted changes")
    assert (repo.path / "src/app.py").read_text() == "my own edit\n"
    assert repo.head() == head
    # Once the user's change is gone, the same call runs (a dirty-path rejection is retryable).
    repo.git("checkout", "--", "src/app.py")
    assert apply(repo, PATCH).returncode == 0
    assert repo.commit_count() == 2


def test_untracked_file_where_patch_adds_is_a_conflict(repo: Repo) -> None:
    (repo.path / "tests").mkdir()
    (repo.path / "tests/test_app.py").write_text("mine\n")
    result = apply(repo, PATCH)
    assert result.returncode == 4
    assert "tests/test_app.py is untracked" in result.stderr
    assert (repo.path / "tests/test_app.py").read_text() == "mine\n"


def test_staged_change_is_dirty_too(repo: Repo) -> None:
    (repo.path / "src/app.py").write_text("staged\n")
    repo.git("add", "src/app.py")
    (repo.path / "src/app.py").write_text("def greet(name):\n    return 'hello ' + name\n")
    assert apply(repo, PATCH).returncode == 4


def test_untouched_user_edits_are_kept(repo: Repo) -> None:
    (repo.path / "README.md").write_text("# my notes\n")
    assert apply(repo, PATCH).returncode == 0
    assert (repo.path / "README.md").read_text() == "# my notes\n"
    assert repo.git("status", "--porcelain") == " M README.md\n"


def test_bare_repository(tmp_path: Path) -> None:
    work = make_repo(tmp_path / "work", {"src/app.py": "def greet(name):\n    return 'hello ' + name\n"})
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


def test_malformed_patch_writes_nothing(repo: Repo) -> None:
    result = apply(repo, "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n")
    assert result.returncode == 1
    assert result.stderr == (
        "error: patch line 2: expected '*** Add File: ', '*** Delete File: ' or "
        "'*** Update File: ', found '*** Frobnicate File: x'; fix the patch text and send it again\n"
    )
    assert not repo.state_dir().exists()


@pytest.mark.parametrize(
    "data",
    [
        b"*** Begin Patch\n*** Add File: a\n+\xff\n*** End Patch\n",
        b'[{"command": "create", "path": "a", "file_text": "\xff"}]',
    ],
    ids=["codex", "edit-json"],
)
def test_non_utf8_codex_or_edit_json_patch_is_refused(repo: Repo, data: bytes) -> None:
    # Only unified diffs carry bytes that are not UTF-8 (byte for byte, as git apply does).
    result = run_cli("apply", "-", "--repo", str(repo.path), input=data)
    assert result.returncode == 1, result
    assert "not UTF-8" in result.stderr and result.stderr.count("\n") == 1
    assert not repo.state_dir().exists()


def test_tampered_receipt_is_never_trusted(repo: Repo) -> None:
    receipt = orjson.loads(apply(repo, PATCH, "--json").stdout)
    path = repo.state_dir() / "receipts" / f"{receipt['call_id']}.json"
    forged = dict(receipt)
    forged["files"] = [dict(f, sha256="0" * 64) for f in receipt["files"]]
    path.write_bytes(orjson.dumps(forged))
    result = apply(repo, PATCH, "--json")
    assert result.returncode == 5
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: receipt {receipt['call_id'][:12]} was changed")
    assert repo.commit_count() == 2


def test_state_dir_option(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert apply(repo, PATCH, "--state-dir", str(state)).returncode == 0
    assert (state / "ledger.sqlite3").is_file()
    assert not repo.state_dir().exists()


def test_absolute_path_inside_repo_is_normalised(repo: Repo) -> None:
    absolute = PATCH.replace("Update File: src/app.py", f"Update File: {repo.path}/src/app.py")
    first = orjson.loads(apply(repo, PATCH, "--json").stdout)
    again = apply(repo, absolute, "--json")
    assert orjson.loads(again.stdout)["call_id"] == first["call_id"]
    assert repo.commit_count() == 2


def test_author_comes_from_repo_config_else_fallback(repo: Repo, tmp_path: Path) -> None:
    repo.git("config", "user.name", "Repo Person")
    repo.git("config", "user.email", "person@example.invalid")
    env = {k: "" for k in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL")}
    clean_env = {k: v for k, v in os.environ.items() if k not in env}
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
        input=PATCH.encode(), env=clean_env, capture_output=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert repo.git("log", "-1", "--format=%an <%ae>").strip() == "Repo Person <person@example.invalid>"
