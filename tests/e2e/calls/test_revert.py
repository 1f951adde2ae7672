"""``applyonce revert CALL_ID``: one commit undoing a call's commit, itself an exactly-once call.

Through the real CLI on real repositories: one-file and multi-file calls, the repeat, a SIGKILL
after the publish then recover then the repeat, later commits on the same lines (refused) and on
other lines (merged), and calls that never committed (refused, nothing written).
"""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
from typer.testing import CliRunner

from applyonce.adapters.cli import app
from tests.conftest import UTIL_PATCH, Repo, Run, make_repo, run_cli
from tests.support.records import record_of

MULTI_PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def greet(name):
-    return 'hello ' + name
+    return f'hello {name}!'
*** Add File: docs/notes.md
+notes
*** Delete File: README.md
*** Update File: src/lines.txt
*** Move to: src/moved.txt
@@
 line 2
-line 3
+LINE 3
 line 4
*** End Patch
"""
LINES = "".join(f"line {n}\n" for n in range(1, 21))


def cli(*args: str, input: str | None = None) -> Run:
    """The CLI in this process (fast); a crash needs its own process (:func:`run_cli`)."""
    result = CliRunner().invoke(app, list(args), input=input)
    return Run(result.exit_code, result.stdout, result.stderr)


def apply(repo: Repo, patch: str, *args: str) -> Run:
    return cli("apply", "-", "--repo", str(repo.path), *args, input=patch)


FILES = {
    "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
    "README.md": "# demo\n",
}


def revert(repo: Repo, call_id: str, *args: str, env: dict[str, str] | None = None) -> Run:
    if env is not None:
        return run_cli("revert", call_id, "--repo", str(repo.path), *args, env=env)
    return cli("revert", call_id, "--repo", str(repo.path), *args)


def call_id_of(repo: Repo, patch: str, *args: str) -> str:
    result = apply(repo, patch, "--json", *args)
    assert result.returncode == 0, result.stderr
    return str(orjson.loads(result.stdout)["call_id"])


def reverting_commits(repo: Repo) -> list[str]:
    out = repo.git("log", "--format=%(trailers:key=Reverts-Call-Id,valueonly)")
    return [line.strip() for line in out.splitlines() if line.strip()]


def assert_clean(repo: Repo) -> None:
    assert cli("audit", "--repo", str(repo.path)).returncode == 0
    assert cli("replay", "--repo", str(repo.path)).returncode == 0
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    assert repo.git("status", "--porcelain") == ""


def test_revert_of_a_one_file_call_is_one_commit_and_a_repeat_replays(repo: Repo) -> None:
    base = repo.files()
    call_id = call_id_of(repo, UTIL_PATCH)
    planned = revert(repo, call_id[:8], "--dry-run")
    assert planned.returncode == 0
    assert "update src/util.py" in planned.stdout and "nothing was written" in planned.stdout
    assert repo.commit_count() == 2

    first = revert(repo, call_id[:8], "--diff")
    assert first.returncode == 0, first.stderr
    output, _, diff = first.stdout.partition("\n\n")
    assert output == "Success. Updated the following files:\nM src/util.py"
    assert "\n-VALUE = 2\n+VALUE = 1\n" in diff and diff.startswith("diff --git")
    assert repo.files() == base and repo.commit_count() == 3
    message = repo.git("log", "-1", "--format=%B")
    assert message.startswith("revert_patch: M src/util.py\n")
    trailers = repo.git("log", "-1", "--format=%(trailers:only,unfold)")
    assert f"Reverts-Call-Id: {call_id}\n" in trailers and "Tool: revert_patch\n" in trailers

    again = revert(repo, call_id)
    assert again.returncode == 0
    head = repo.head()[:12]  # the revert's commit, still the tip
    assert again.stdout.startswith("replayed: this call (")
    assert again.stdout.endswith(
        f"made commit {head} on main; nothing ran now.\nits stored result:\n{output}\n"
    )
    assert repo.commit_count() == 3 and reverting_commits(repo) == [call_id]
    # The reverted call's commit is still on the branch: audit is clean for it.
    assert_clean(repo)


def test_revert_of_a_multi_file_call_add_update_delete_move(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {**FILES, "src/lines.txt": LINES})
    base_commit, base_files = repo.head(), repo.files()
    call_id = call_id_of(repo, MULTI_PATCH)
    result = revert(repo, call_id, "--json")
    assert result.returncode == 0, result.stderr
    receipt = orjson.loads(result.stdout)
    assert receipt["tool"] == "revert_patch" and receipt["status"] == "committed"
    actions = {(f["path"], f["action"], f["from"]) for f in receipt["files"]}
    assert actions == {
        ("src/app.py", "update", None),
        ("docs/notes.md", "delete", None),
        ("README.md", "add", None),
        ("src/lines.txt", "move", "src/moved.txt"),
    }
    assert repo.git("diff", "--stat", base_commit, "HEAD") == ""
    assert repo.files() == base_files
    assert_clean(repo)


def test_crash_after_publish_then_recover_then_repeat_gives_one_revert_commit(
    tmp_path: Path,
) -> None:
    plain = make_repo(tmp_path / "plain", {**FILES, "src/lines.txt": LINES})
    assert revert(plain, call_id_of(plain, MULTI_PATCH)).returncode == 0
    repo = make_repo(tmp_path / "repo", {**FILES, "src/lines.txt": LINES})
    base_files = repo.files()
    call_id = call_id_of(repo, MULTI_PATCH)
    crashed = revert(repo, call_id, env={"APPLYONCE_FAULT": "after-publish"})
    assert crashed.returncode == -signal.SIGKILL
    recovered = cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0 and "committed" in recovered.stdout
    again = revert(repo, call_id)
    assert again.returncode == 0, again.stderr
    assert again.stdout.partition("its stored result:\n")[2].startswith(
        "Success. Updated the following files:\n"
    )
    assert reverting_commits(repo) == [call_id] and repo.commit_count() == 3
    assert repo.files() == base_files
    assert_clean(repo)
    # Recovery adopted the commit by planning the revert again: the receipt it wrote is the one
    # the revert would have written.
    receipts = [
        orjson.loads(cli("show", reverting_id(r), "--repo", str(r.path), "--json").stdout)
        for r in (plain, repo)
    ]
    assert receipts[1]["reconciled"] is True and receipts[0]["reconciled"] is False
    assert receipts[1]["files"] == receipts[0]["files"]
    assert receipts[1]["output"] == receipts[0]["output"]


def reverting_id(repo: Repo) -> str:
    return repo.git("log", "-1", "--format=%(trailers:key=Call-Id,valueonly)").strip()


def test_revert_refused_when_a_later_commit_changed_those_lines(repo: Repo) -> None:
    first = call_id_of(repo, UTIL_PATCH)
    later = UTIL_PATCH.replace("VALUE = 1", "VALUE = 2").replace("+VALUE = 2\n*", "+VALUE = 3\n*")
    second = call_id_of(repo, later)
    later_commit = repo.head()
    files, commits = repo.files(), repo.commit_count()

    refused = revert(repo, first)
    assert refused.returncode == 4
    assert refused.stdout == ""
    assert refused.stderr.startswith(
        f"error: cannot revert call {first[:12]}: later commits changed what it wrote in "
        f"src/util.py (commits to it since "
    )
    assert f"{later_commit[:12]} (apply_patch: M src/util.py)" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert repo.files() == files and repo.commit_count() == commits
    assert repo.git("status", "--porcelain") == ""

    # The refusal is of the branch as it is (retryable): undo the later call, then it runs.
    assert revert(repo, second).returncode == 0
    assert revert(repo, first).returncode == 0
    assert repo.path.joinpath("src/util.py").read_text() == "VALUE = 1\n"
    assert_clean(repo)


def test_revert_merges_when_a_later_commit_changed_other_lines_of_the_file(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"f.txt": LINES})
    patch = "*** Begin Patch\n*** Update File: f.txt\n@@\n line 2\n-line 3\n+LINE 3\n line 4\n*** End Patch\n"
    call_id = call_id_of(repo, patch)
    # A later commit by hand, on other lines of the same file.
    (repo.path / "f.txt").write_text(
        repo.path.joinpath("f.txt").read_text().replace("line 17\n", "line 17 by hand\n")
    )
    repo.git("commit", "-q", "-am", "by hand")
    result = revert(repo, call_id)
    assert result.returncode == 0, result.stderr
    assert repo.path.joinpath("f.txt").read_text() == LINES.replace(
        "line 17\n", "line 17 by hand\n"
    )
    assert repo.git("status", "--porcelain") == ""


def test_revert_refuses_a_call_that_did_not_commit_and_writes_nothing(repo: Repo) -> None:
    stale = UTIL_PATCH.replace("-VALUE = 1", "-VALUE = 9")
    rejected = apply(repo, stale, "--json")
    assert rejected.returncode == 1
    call_id = orjson.loads(rejected.stdout)["call_id"]
    state_before = record_of(repo)
    head = repo.head()

    refused = revert(repo, call_id)
    assert refused.returncode == 2
    assert refused.stderr == (
        f"error: call {call_id[:12]} is rejected; only a committed call can be reverted; "
        "it changed nothing, so there is nothing to undo\n"
    )
    missing = revert(repo, "abcdef1234")
    assert missing.returncode == 2 and missing.stderr.startswith("error: no call 'abcdef1234'")
    assert repo.head() == head and repo.commit_count() == 1
    assert record_of(repo) == state_before  # no receipt, no ledger event


def test_a_commit_carrying_a_reverts_call_id_but_another_change_is_not_adopted(
    repo: Repo,
) -> None:
    call_id = call_id_of(repo, UTIL_PATCH)
    crashed = revert(repo, call_id, env={"APPLYONCE_FAULT": "after-prepared"})
    assert crashed.returncode == -signal.SIGKILL
    [row] = [
        r
        for r in orjson.loads(cli("log", "--repo", str(repo.path), "--json").stdout)
        if r["state"] == "prepared"
    ]
    prepared = orjson.loads((repo.state_dir() / "receipts" / f"{row['call_id']}.json").read_bytes())
    # Someone commits another change under the revert's trailers (its identity recomputes).
    (repo.path / "README.md").write_text("# changed\n")
    trailers = (
        f"Call-Id: {prepared['call_id']}\nContract-Sha256: {prepared['contract_sha256']}\n"
        f"Attempt: 1\nTool: revert_patch\nTool-Version: {prepared['tool_version']}\n"
        f"Args-Sha256: {prepared['args_sha256']}\nReverts-Call-Id: {call_id}\n"
    )
    repo.git("commit", "-q", "-am", f"revert_patch: M src/util.py\n\n{trailers}")
    recovered = cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 5
    assert "a commit carries this Call-Id but not its change" in recovered.stdout
    again = revert(repo, call_id)
    assert again.returncode == 5 and repo.path.joinpath("src/util.py").read_text() == "VALUE = 2\n"


def test_revert_of_a_change_already_undone_by_hand_changes_nothing(repo: Repo) -> None:
    call_id = call_id_of(repo, UTIL_PATCH)
    (repo.path / "src/util.py").write_text("VALUE = 1\n")
    repo.git("commit", "-q", "-am", "undo by hand")
    head = repo.head()
    refused = revert(repo, call_id)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        "error: every file the call changed is already as it was before it; the change is "
        "already undone on the branch"
    )
    assert repo.head() == head


def test_a_repeated_revert_says_it_is_a_replay_as_apply_does(repo: Repo) -> None:
    call_id = call_id_of(repo, UTIL_PATCH)
    first = revert(repo, call_id, "--json")
    again = revert(repo, call_id, "--json")
    assert (first.returncode, again.returncode) == (0, 0), again.stderr
    first_doc, again_doc = orjson.loads(first.stdout), orjson.loads(again.stdout)
    assert (first_doc.pop("replayed"), again_doc.pop("replayed")) == (False, True)
    assert again_doc.pop("replay_note").startswith("replayed: this call (")
    assert first_doc == again_doc
    [line] = [x for x in again.stderr.splitlines() if x.startswith("applyonce: replayed call")]
    assert again_doc["commit"][:12] in line and "refs/heads/main" in line
    assert "replayed" not in first.stderr
    assert len(reverting_commits(repo)) == 1
