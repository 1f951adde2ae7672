"""Unified diffs and text-editor commands through the real CLI: commits, one identity, refusals.

Every refusal runs ``applyonce apply - --repo R --format F`` in its own process and checks the exit
code (1), the one-line ``error: …`` on stderr, that no commit was made and that the work tree did
not change; refusals found while parsing also leave no state directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from tests.conftest import Repo, make_repo, run_cli, stored_json

pytestmark = pytest.mark.sampled(every=2, by="module")

APP = "import os\n\n\ndef greet(name):\n    return 'hello ' + name\n\n\nVALUE = 1\n"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(
        tmp_path / "repo",
        {"src/app.py": APP, "README.md": "# demo\n", "data/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00"},
    )


def apply(repo: Repo, patch: str, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=patch)


def assert_refused(
    repo: Repo,
    result,
    before: dict[str, bytes],
    head: str,
    *,  # type: ignore[no-untyped-def]
    stateless: bool,
) -> str:
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: ")
    # One error line; lines that were not found add their repair data after it.
    first, _, repair = result.stderr.partition("\n")
    assert not repair or repair.startswith("expected lines ("), result.stderr
    assert repo.head() == head
    assert repo.commit_count() == 1
    assert repo.files() == before
    if stateless:
        assert not repo.state_dir().exists()
    return first[len("error: ") :]


# The git diff of this change, made below with the real git, has these context lines: the Codex
# patch spells the same hunk with a bare '@@'.
CODEX = """*** Begin Patch
*** Update File: src/app.py
@@
 
 
 def greet(name):
-    return 'hello ' + name
+    return f'hello {name}!'
 
 
 VALUE = 1
*** End Patch
"""


def test_codex_update_then_the_git_diff_of_it_is_a_new_call_on_the_new_tip(repo: Repo) -> None:
    # A unified hunk carries its line numbers (they pick the place), so it is another call: on
    # the tip that already has the change its context is gone, and nothing is written twice.
    first = apply(repo, CODEX, "--json")
    assert first.returncode == 0, first.stderr
    receipt = orjson.loads(first.stdout)
    diff = repo.git("diff", "HEAD~1", "HEAD")
    again = apply(repo, diff, "--json")
    assert again.returncode == 1
    assert orjson.loads(again.stdout)["call_id"] != receipt["call_id"]
    assert orjson.loads(again.stdout)["error"]["kind"] == "hunk-mismatch"
    assert repo.call_ids() == [receipt["call_id"]]


def test_codex_add_then_the_git_diff_of_it_is_one_commit_and_one_call(repo: Repo) -> None:
    first = apply(repo, "*** Begin Patch\n*** Add File: docs/n.md\n+# N\n*** End Patch\n", "--json")
    assert first.returncode == 0, first.stderr
    receipt = orjson.loads(first.stdout)
    diff = repo.git("diff", "HEAD~1", "HEAD")
    assert diff.startswith("diff --git a/docs/n.md b/docs/n.md\n")
    again = apply(repo, diff, "--json")
    assert again.returncode == 0, again.stderr
    assert orjson.loads(again.stdout)["call_id"] == receipt["call_id"]
    assert stored_json(again.stdout) == stored_json(first.stdout)  # the stored receipt, replayed
    assert repo.commit_count() == 2
    assert repo.call_ids() == [receipt["call_id"]]
    # Explicitly as unified, too.
    unified = apply(repo, diff, "--json", "--format", "unified")
    assert stored_json(unified.stdout) == stored_json(first.stdout)


def test_git_diff_with_rename_mode_and_new_file_commits_once(repo: Repo, tmp_path: Path) -> None:
    # Make the diff in a clone, so the repository itself stays at its base.
    work = make_repo(tmp_path / "work", repo.files())
    work.git("mv", "src/app.py", "src/main.py")
    (work.path / "src/main.py").write_text(APP.replace("VALUE = 1", "VALUE = 2"))
    (work.path / "run.sh").write_text("#!/bin/sh\necho run\n")
    (work.path / "run.sh").chmod(0o755)
    (work.path / "README.md").write_text("# demo")  # no final newline
    work.git("add", "-A")
    diff = work.git("diff", "--cached", "-M")
    result = apply(repo, diff, "--json", "--format", "unified")
    assert result.returncode == 0, result.stderr
    receipt = orjson.loads(result.stdout)
    actions = {f["path"]: (f["action"], f["mode"]) for f in receipt["files"]}
    assert actions == {
        "README.md": ("update", "100644"),
        "run.sh": ("add", "100755"),
        "src/main.py": ("move", "100644"),
    }
    # The committed tree is the one git staged in the clone: same blobs, same modes.
    assert repo.git("rev-parse", "HEAD^{tree}").strip() == work.git("write-tree").strip()
    assert repo.git("status", "--porcelain") == ""
    assert repo.git("fsck", "--strict", "--no-dangling") == ""


def test_edit_json_commands_commit_as_one_call(repo: Repo) -> None:
    commands = [
        {
            "command": "str_replace",
            "path": "src/app.py",
            "old_str": "VALUE = 1",
            "new_str": "VALUE = 2",
        },
        {
            "command": "insert",
            "path": "src/app.py",
            "insert_line": 1,
            "insert_text": "import sys\n",
        },
        {"command": "create", "path": "docs/notes.md", "file_text": "# Notes\n"},
        {
            "command": "str_replace",
            "path": "docs/notes.md",
            "old_str": "Notes",
            "new_str": "Notes 2",
        },
    ]
    result = apply(repo, json.dumps(commands))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Success. Updated the following files:\nM src/app.py\nA docs/notes.md\n"
    assert (repo.path / "src/app.py").read_text().startswith("import os\nimport sys\n")
    assert (repo.path / "docs/notes.md").read_text() == "# Notes 2\n"
    assert repo.commit_count() == 2
    assert apply(repo, json.dumps({"commands": commands})).returncode == 0  # same call: replayed
    assert repo.commit_count() == 2


def test_edit_json_create_is_the_same_call_as_codex_add_file(repo: Repo) -> None:
    codex = apply(repo, "*** Begin Patch\n*** Add File: n.txt\n+n\n*** End Patch\n", "--json")
    create = apply(
        repo, json.dumps([{"command": "create", "path": "n.txt", "file_text": "n\n"}]), "--json"
    )
    assert create.returncode == 0
    assert stored_json(create.stdout) == stored_json(codex.stdout)
    assert repo.commit_count() == 2


# ---------------------------------------------------------------- refusals


def test_binary_patch_is_refused(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    patch = (
        "diff --git a/data/logo.png b/data/logo.png\nindex 1234567..89abcde 100644\n"
        "GIT binary patch\nliteral 5\nMcmZQzU|?imfB*;p\n\nliteral 0\nHcmV?d00001\n\n"
    )
    message = assert_refused(
        repo, apply(repo, patch, "--format", "unified"), before, head, stateless=True
    )
    assert message.startswith(
        "patch line 3: data/logo.png has a binary change; applyonce applies text changes only"
    )


def test_malformed_hunk_header_is_refused(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    patch = "--- a/src/app.py\n+++ b/src/app.py\n@@ -4,2 +4,2\n def greet(name):\n-x\n+y\n"
    message = assert_refused(
        repo, apply(repo, patch, "--format", "unified"), before, head, stateless=True
    )
    assert message == (
        "patch line 3: malformed hunk header '@@ -4,2 +4,2'; write hunk headers as "
        "'@@ -START,COUNT +START,COUNT @@'"
    )


@pytest.mark.parametrize(
    ("format", "patch"),
    [
        (
            "unified",
            "diff --git a/../x.txt b/../x.txt\nnew file mode 100644\n--- /dev/null\n"
            "+++ b/../x.txt\n@@ -0,0 +1 @@\n+x\n",
        ),
        ("edit-json", json.dumps([{"command": "create", "path": "../x.txt", "file_text": "x\n"}])),
    ],
)
def test_path_outside_the_repository_is_refused(
    repo: Repo, tmp_path: Path, format: str, patch: str
) -> None:
    before, head = repo.files(), repo.head()
    message = assert_refused(
        repo, apply(repo, patch, "--format", format), before, head, stateless=True
    )
    assert message.startswith("path '../x.txt' contains '..'")
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize(
    ("old_str", "count", "detail"),
    [("return 'bye'", 0, "0 times"), ("\n\n\n", 2, "2 times (lines 1, 5)")],
    ids=["absent", "ambiguous"],
)
def test_str_replace_that_does_not_match_exactly_once_is_refused(
    repo: Repo, old_str: str, count: int, detail: str
) -> None:
    before, head = repo.files(), repo.head()
    patch = json.dumps(
        [
            {"command": "create", "path": "other.txt", "file_text": "o\n"},
            {"command": "str_replace", "path": "src/app.py", "old_str": old_str, "new_str": "x"},
        ]
    )
    message = assert_refused(
        repo, apply(repo, patch, "--format", "edit-json"), before, head, stateless=False
    )
    assert message.startswith(
        f"src/app.py: commands[1] (str_replace): old_str occurs {detail}; it must occur exactly once"
    )
    rejected = apply(repo, patch, "--json")
    receipt = orjson.loads(rejected.stdout)
    assert receipt["status"] == "rejected"
    assert receipt["error"]["kind"] == "edit-command"
    assert (receipt["error"]["count"], receipt["error"]["command"]) == (count, 1)
    assert not (repo.path / "other.txt").exists()


def test_insert_line_out_of_range_is_refused(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    patch = json.dumps(
        [{"command": "insert", "path": "README.md", "insert_line": 5, "insert_text": "x\n"}]
    )
    message = assert_refused(
        repo, apply(repo, patch, "--format", "edit-json"), before, head, stateless=False
    )
    assert message.startswith(
        "README.md: commands[0] (insert): insert_line 5 is out of range; README.md has 1 lines "
        "(use 0 to 1)"
    )


def test_unknown_edit_command_is_refused(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    patch = json.dumps([{"command": "view", "path": "README.md"}])
    message = assert_refused(repo, apply(repo, patch), before, head, stateless=True)
    assert (
        message == "commands[0]: unknown command 'view'; use create, str_replace, insert or delete"
    )


def test_unified_hunk_that_does_not_apply_rejects_the_whole_diff(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    patch = (
        "--- a/README.md\n+++ b/README.md\n@@ -1 +1 @@\n-# demo\n+# Demo\n"
        "--- a/src/app.py\n+++ b/src/app.py\n@@ -4,2 +4,2 @@\n def greet(name):\n"
        "-    return 'bye'\n+    return 'hi'\n"
    )
    message = assert_refused(repo, apply(repo, patch), before, head, stateless=False)
    assert message.startswith("src/app.py: hunk 1 (@@ -4,2 @@): expected lines not found")


def test_explicit_format_that_does_not_fit_names_it(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    message = assert_refused(
        repo, apply(repo, CODEX, "--format", "edit-json"), before, head, stateless=True
    )
    assert message.startswith("the patch is not in the edit-json format (tried: edit-json)")
    unrecognised = apply(repo, "make it better\n")
    assert unrecognised.returncode == 2  # not a patch at all: a usage error
    assert unrecognised.stderr == (
        "error: the patch format was not recognised (tried: codex apply_patch, search/replace "
        "blocks, unified diff, edit-json): it looks like prose or code, not a patch (it starts "
        "'make it better'); send a Codex patch ('*** Begin Patch'), SEARCH/REPLACE blocks (a "
        "file's path, then '<<<<<<< SEARCH'), a unified diff ('diff --git') or a JSON list of "
        "text-editor commands\n"
    )
    assert repo.head() == head and repo.files() == before and not repo.state_dir().exists()
