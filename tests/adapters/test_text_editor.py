"""Claude's text editor tool (text_editor_20250728) through ToolCallAdapter, on real repositories.

Each call is an Anthropic ``tool_use`` block as the Messages API returns it. Edits land as one
commit each, exactly once; views read and never write; refusals are ``is_error`` results that
leave the branch and the files as they were.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from applyonce.adapters.agents import ToolCallAdapter
from applyonce.adapters.cli import app
from applyonce.executor import Executor
from tests.conftest import Repo, make_repo, without_replay_notes

APP = "def f():\n    return 1\n\ndef g():\n    return 1\n"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(
        tmp_path / "repo",
        {
            "src/app.py": APP,
            "src/pkg/deep/mod.py": "X = 1\n",
            "src/pkg/deep/blob.bin": b"a\x00b",
            "README.md": "# demo\n",
        },
    )


def tool_use(id: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": "str_replace_based_edit_tool", "input": input}


def turn(*blocks: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as the Messages API returns it."""
    return {"role": "assistant", "content": [{"type": "text", "text": "On it."}, *blocks]}


def run_one(adapter: ToolCallAdapter, block: dict[str, Any]) -> dict[str, Any]:
    [result] = adapter.run(turn(block))
    assert result["type"] == "tool_result" and result["tool_use_id"] == block["id"]
    return result


def whole_repo(repo: Repo) -> dict[str, bytes]:
    """Every file under the repository, .git included: what "writes nothing" is checked on."""
    return {
        str(p.relative_to(repo.path)): p.read_bytes()
        for p in sorted(repo.path.rglob("*"))
        if p.is_file()
    }


# --- edits: one commit each, exactly once ----------------------------------------------------------


def test_create_is_one_commit_and_its_repeat_replays(repo: Repo) -> None:
    adapter = ToolCallAdapter(repo.path)
    block = tool_use(
        "toolu_01Create", command="create", path="docs/notes.md", file_text="# notes\n"
    )
    result = run_one(adapter, block)
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_01Create",
        "content": "File created successfully at: docs/notes.md\n",
        "is_error": False,
    }
    assert repo.commit_count() == 2
    assert repo.files()["docs/notes.md"] == b"# notes\n"
    assert repo.git("log", "-1", "--format=%(trailers:key=Tool-Call-Id,valueonly)").strip() == (
        "toolu_01Create"
    )
    # The harness replays the turn: the stored result, byte for byte, and no second commit.
    again = run_one(ToolCallAdapter(repo.path), block)
    assert again["content"].startswith("replayed: this call (")
    assert without_replay_notes(again) == result
    assert repo.commit_count() == 2


def test_str_replace_is_one_commit(repo: Repo) -> None:
    block = tool_use(
        "toolu_01Replace",
        command="str_replace",
        path="src/app.py",
        old_str="def g():\n    return 1",
        new_str="def g():\n    return 2",
    )
    result = run_one(ToolCallAdapter(repo.path), block)
    assert (
        result["content"] == "Successfully replaced text at exactly one location in src/app.py.\n"
    )
    assert result["is_error"] is False
    assert repo.files()["src/app.py"] == b"def f():\n    return 1\n\ndef g():\n    return 2\n"
    assert repo.commit_count() == 2
    assert repo.git("status", "--porcelain") == ""  # the checkout was synced


@pytest.mark.parametrize("field", ["insert_text", "new_str"])
def test_insert_takes_insert_text_or_new_str(repo: Repo, field: str) -> None:
    block = tool_use(
        "toolu_01Insert",
        command="insert",
        path="src/app.py",
        insert_line=2,
        **{field: "    # done\n"},
    )
    result = run_one(ToolCallAdapter(repo.path), block)
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_01Insert",
        "content": "Successfully inserted text after line 2 of src/app.py.\n",
        "is_error": False,
    }
    assert repo.files()["src/app.py"] == (
        b"def f():\n    return 1\n    # done\n\ndef g():\n    return 1\n"
    )
    assert repo.commit_count() == 2


def test_insert_spelled_either_way_is_one_call(repo: Repo) -> None:
    """The identity is the parsed command, not its spelling: the same insert under another
    field name (or the same tool_use replayed) is answered from the first call's receipt."""
    adapter = ToolCallAdapter(repo.path)
    first = run_one(
        adapter,
        tool_use(
            "toolu_A", command="insert", path="./src/app.py", insert_line=0, insert_text="# top\n"
        ),
    )
    again = run_one(
        adapter,
        tool_use("toolu_A", command="insert", path="src/app.py", insert_line=0, new_str="# top\n"),
    )
    assert without_replay_notes(again) == first and first["is_error"] is False
    assert repo.commit_count() == 2
    assert repo.files()["src/app.py"].startswith(b"# top\ndef f():\n")


def test_the_same_edit_from_another_tool_call_says_it_was_not_applied_again(repo: Repo) -> None:
    """Edits are identified by what they change (docs/design.md §3): the same insert sent again by a
    new tool call is the recorded call, and is not applied twice; its result says so."""
    adapter = ToolCallAdapter(repo.path)
    insert = {"command": "insert", "path": "README.md", "insert_line": 1, "insert_text": "more\n"}
    first = run_one(adapter, tool_use("toolu_First", **insert))
    assert first["content"] == "Successfully inserted text after line 1 of README.md.\n"
    commit = repo.head()
    second = without_replay_notes(run_one(adapter, tool_use("toolu_Second", **insert)))
    assert second == {
        "type": "tool_result",
        "tool_use_id": "toolu_Second",
        "is_error": False,
        "content": "Successfully inserted text after line 1 of README.md.\nNote: this is the "
        f"same edit as tool call toolu_First, which made it as commit {commit[:12]}; it was not "
        "applied a second time.\n",
    }
    assert repo.head() == commit and repo.files()["README.md"] == b"# demo\nmore\n"


def test_a_harness_killed_after_the_publish_answers_the_edit_once_on_replay(
    repo: Repo, tmp_path: Path
) -> None:
    """A real SIGKILL after the commit moved the branch, before any record: the replayed turn
    settles the call through Git (its Call-Id is on the branch) and applies nothing again."""
    transcript = tmp_path / "turn.json"
    transcript.write_text(
        json.dumps(
            turn(
                tool_use(
                    "toolu_01Crash",
                    command="str_replace",
                    path="README.md",
                    old_str="# demo",
                    new_str="# Demo",
                )
            )
        )
    )
    harness = (
        "import json, sys\nfrom applyonce.adapters.agents import ToolCallAdapter\n"
        "print(json.dumps(ToolCallAdapter(sys.argv[1]).run(json.load(open(sys.argv[2])))))\n"
    )
    killed = subprocess.run(
        [sys.executable, "-c", harness, str(repo.path), str(transcript)],
        env={**os.environ, "APPLYONCE_FAULT": "after-publish"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert killed.returncode == -9, killed.stderr
    assert repo.commit_count() == 2  # the effect happened; its result was never delivered

    [result] = ToolCallAdapter(repo.path).run(json.loads(transcript.read_text()))
    assert without_replay_notes(result) == {
        "type": "tool_result",
        "tool_use_id": "toolu_01Crash",
        "content": "Successfully replaced text at exactly one location in README.md.\n",
        "is_error": False,
    }
    assert repo.commit_count() == 2 and len(repo.call_ids()) == 1
    assert repo.files()["README.md"] == b"# Demo\n"
    receipt = Executor(repo.path).stored_receipt(repo.call_ids()[0])
    assert receipt.status == "committed" and receipt.reconciled


# --- edits that do not fit: is_error, nothing written --------------------------------------------


@pytest.mark.parametrize(
    ("input", "content"),
    [
        (
            {"command": "str_replace", "path": "src/app.py", "old_str": "return 3", "new_str": "x"},
            "Error: No match found for replacement text in src/app.py. Please check your text "
            "and try again: old_str must match the file exactly, whitespace included.\n",
        ),
        (
            {"command": "str_replace", "path": "src/app.py", "old_str": "return 1", "new_str": "x"},
            "Error: Found 2 matches for replacement text in src/app.py (lines 2, 5). Please "
            "provide more context to make a unique match.\n",
        ),
        (
            {"command": "insert", "path": "src/app.py", "insert_line": 9, "insert_text": "x\n"},
            "Error: Invalid insert_line 9: src/app.py has 5 lines; use 0 to 5.\n",
        ),
        (
            {"command": "str_replace", "path": "gone.py", "old_str": "a", "new_str": "b"},
            "Error: File not found: gone.py. Create it with the create command first.\n",
        ),
        (
            {
                "command": "str_replace",
                "path": "src/pkg/deep/blob.bin",
                "old_str": "a",
                "new_str": "b",
            },
            "Error: src/pkg/deep/blob.bin is a binary file (it contains NUL bytes); the text "
            "editor edits UTF-8 text only\n",
        ),
        (
            {"command": "create", "path": "README.md", "file_text": "# replaced\n"},
            "Error: File already exists at: README.md. Cannot overwrite files using command "
            "`create`; change it with str_replace or insert.\n",
        ),
    ],
    ids=[
        "no-match",
        "two-matches",
        "insert-line-out-of-range",
        "missing-file",
        "binary-file",
        "create-onto-an-existing-file",
    ],
)
def test_an_edit_that_does_not_fit_is_an_error_and_writes_nothing(
    repo: Repo, input: dict[str, Any], content: str
) -> None:
    head, files = repo.head(), whole_repo(repo)
    adapter = ToolCallAdapter(repo.path)
    result = run_one(adapter, tool_use("toolu_01Bad", **input))
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_01Bad",
        "content": content,
        "is_error": True,
    }
    assert repo.head() == head
    assert repo.files() == {p: d for p, d in files.items() if not p.startswith(".git/")}
    # The rejection is the call's stored result: a replay says the same.
    again = run_one(adapter, tool_use("toolu_01Bad", **input))
    assert without_replay_notes(again) == result
    assert repo.head() == head


@pytest.mark.parametrize(
    ("input", "content"),
    [
        (
            {"command": "undo_edit", "path": "README.md"},
            "Error: undo_edit is not a command of text_editor_20250728; nothing was undone. "
            "No applyonce call changed README.md; there is no edit to revert.\n",
        ),
        (
            {"command": "rename", "path": "README.md"},
            "Error: unknown command 'rename'; send one of the commands view, create, str_replace, "
            "insert with its fields\n",
        ),
        (
            {"command": "create", "path": "a.txt", "file_text": "x", "mode": "0755"},
            "Error: create takes no field 'mode'; create takes file_text, path\n",
        ),
        (
            {"command": "create", "path": "../outside.txt", "file_text": "x"},
            "Error: path '../outside.txt' contains '..'; use a path relative to the repository "
            "root, inside it and outside .git\n",
        ),
    ],
    ids=["undo-edit", "unknown-command", "unknown-field", "path-outside"],
)
def test_a_call_that_is_not_a_command_is_an_error_and_writes_nothing(
    repo: Repo, input: dict[str, Any], content: str
) -> None:
    head, files = repo.head(), whole_repo(repo)
    result = run_one(ToolCallAdapter(repo.path), tool_use("toolu_01Nope", **input))
    assert result["is_error"] is True
    assert result["content"] == content
    assert repo.head() == head
    assert repo.files() == {p: d for p, d in files.items() if not p.startswith(".git/")}


def test_undo_edit_names_the_last_call_and_the_revert_that_undoes_it(repo: Repo) -> None:
    adapter = ToolCallAdapter(repo.path)
    edit = tool_use(
        "toolu_01Edit",
        command="str_replace",
        path="src/app.py",
        old_str="def f():",
        new_str="def h():",
    )
    assert run_one(adapter, edit)["is_error"] is False
    other = tool_use("toolu_01Other", command="create", path="b.txt", file_text="b\n")
    assert run_one(adapter, other)["is_error"] is False
    call_id = Executor(repo.path).find_by_tool_call_id("toolu_01Edit")
    assert call_id is not None
    head = repo.head()
    edited = repo.git("log", "-1", "--format=%H", "--", "src/app.py").strip()
    result = run_one(adapter, tool_use("toolu_01Undo", command="undo_edit", path="./src/app.py"))
    assert result["is_error"] is True
    assert result["content"] == (
        "Error: undo_edit is not a command of text_editor_20250728; nothing was undone. "
        f"The last edit of ./src/app.py is call {call_id[:12]} (commit {edited[:12]}); to undo "
        f"it, run 'applyonce revert {call_id[:12]}': one new commit that reverts it.\n"
    )
    assert repo.head() == head  # nothing was undone
    # The command it names, run as a real process, undoes the edit.
    done = subprocess.run(
        [sys.executable, "-m", "applyonce", "revert", call_id[:12], "--repo", str(repo.path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (repo.path / "src/app.py").read_text() == APP
    assert (repo.path / "b.txt").read_text() == "b\n"


# --- view: read-only ------------------------------------------------------------------------------


def test_view_numbers_the_lines_and_writes_nothing(repo: Repo) -> None:
    adapter = ToolCallAdapter(repo.path)
    before = whole_repo(repo)
    result = run_one(adapter, tool_use("toolu_01View", command="view", path="src/app.py"))
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_01View",
        "is_error": False,
        "content": "Here's the result of running `cat -n` on src/app.py:\n"
        "     1\tdef f():\n     2\t    return 1\n     3\t\n     4\tdef g():\n     5\t    return 1\n",
    }
    assert whole_repo(repo) == before


@pytest.mark.parametrize(
    ("view_range", "lines"),
    [
        ([2, 3], "     2\t    return 1\n     3\t\n"),
        ([4, -1], "     4\tdef g():\n     5\t    return 1\n"),
        ([5, 99], "     5\t    return 1\n"),
    ],
    ids=["middle", "to-the-end", "end-past-the-last-line"],
)
def test_view_range_shows_those_lines(repo: Repo, view_range: list[int], lines: str) -> None:
    result = run_one(
        ToolCallAdapter(repo.path),
        tool_use("toolu_01Range", command="view", path="src/app.py", view_range=view_range),
    )
    assert result["content"] == f"Here's the result of running `cat -n` on src/app.py:\n{lines}"
    assert result["is_error"] is False


def test_view_reads_the_checkout_as_the_agent_sees_it(repo: Repo) -> None:
    (repo.path / "src" / "app.py").write_text("edited by hand\n")
    result = run_one(
        ToolCallAdapter(repo.path), tool_use("toolu_V", command="view", path="src/app.py")
    )
    assert result["content"].endswith("     1\tedited by hand\n")


def test_view_of_a_folder_lists_two_levels_without_git(repo: Repo) -> None:
    before = whole_repo(repo)
    adapter = ToolCallAdapter(repo.path)
    result = run_one(adapter, tool_use("toolu_01Dir", command="view", path="."))
    assert result["content"] == (
        "Here are the files and directories up to 2 levels deep in ., excluding .git:\n"
        "README.md\nsrc/\nsrc/app.py\nsrc/pkg/\n"
    )
    result = run_one(adapter, tool_use("toolu_02Dir", command="view", path=f"{repo.path}/src/"))
    assert result["content"] == (
        "Here are the files and directories up to 2 levels deep in src, excluding .git:\n"
        "src/app.py\nsrc/pkg/\nsrc/pkg/deep/\n"
    )
    assert whole_repo(repo) == before


def test_view_of_a_bare_repository_reads_the_branch_tip(repo: Repo, tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo.path), str(bare)], check=True)
    adapter = ToolCallAdapter(bare)
    assert (
        run_one(
            adapter, tool_use("toolu_B1", command="view", path="src/app.py", view_range=[1, 2])
        )["content"]
        == "Here's the result of running `cat -n` on src/app.py:\n     1\tdef f():\n     2\t    return 1\n"
    )
    assert run_one(adapter, tool_use("toolu_B2", command="view", path="src"))["content"] == (
        "Here are the files and directories up to 2 levels deep in src, excluding .git:\n"
        "src/app.py\nsrc/pkg/\nsrc/pkg/deep/\n"
    )


@pytest.mark.parametrize(
    ("path", "content"),
    [
        (
            "/etc/passwd",
            "Error: absolute path '/etc/passwd' is outside the repository; use a path "
            "relative to the repository root, inside it and outside .git\n",
        ),
        (
            "src/../../x",
            "Error: path 'src/../../x' contains '..'; use a path relative to the "
            "repository root, inside it and outside .git\n",
        ),
        (
            ".git/config",
            "Error: path '.git/config' is inside .git; use a path relative to the "
            "repository root, inside it and outside .git\n",
        ),
        (
            "link/secret",
            "Error: link/secret goes through a symbolic link, which a view does not "
            "follow; view the path the link points to\n",
        ),
        (
            "src/app.py/x",
            "Error: file not found: src/app.py/x; view '.' to list the repository's files\n",
        ),
        (
            "src/pkg/deep/blob.bin",
            "Error: src/pkg/deep/blob.bin is a binary file (it contains NUL "
            "bytes); a view shows UTF-8 text files only\n",
        ),
    ],
    ids=["absolute-outside", "dot-dot", "git-dir", "symlinked-parent", "under-a-file", "binary"],
)
def test_view_refuses_what_it_cannot_show(
    repo: Repo, tmp_path: Path, path: str, content: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("do not show\n")
    (repo.path / "link").symlink_to(outside)
    result = run_one(ToolCallAdapter(repo.path), tool_use("toolu_01Out", command="view", path=path))
    assert result == {
        "type": "tool_result",
        "tool_use_id": "toolu_01Out",
        "content": content,
        "is_error": True,
    }


def test_view_range_that_does_not_fit_the_file_is_an_error(repo: Repo) -> None:
    result = run_one(
        ToolCallAdapter(repo.path),
        tool_use("toolu_R", command="view", path="src/app.py", view_range=[7, 9]),
    )
    assert result["is_error"] is True
    assert result["content"] == (
        "Error: view_range [7, 9]: the file has 5 lines; start at 1 to 5; view the file "
        "without view_range to see all of it\n"
    )


def test_max_characters_clips_a_view(repo: Repo) -> None:
    result = run_one(
        ToolCallAdapter(repo.path, max_characters=59),
        tool_use("toolu_M", command="view", path="src/app.py"),
    )
    assert result["content"] == (
        "Here's the result of running `cat -n` on src/app.py:\n     1"
        "\n<response clipped at 59 characters: view a view_range to see the rest>\n"
    )


# --- the tool definition --------------------------------------------------------------------------


def schema(*args: str) -> Any:
    return CliRunner().invoke(app, ["schema", "--for", "anthropic", *args])


def test_schema_prints_the_text_editor_definition() -> None:
    run = schema("--tool", "text-editor")
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout) == {
        "type": "text_editor_20250728",
        "name": "str_replace_based_edit_tool",
    }
    run = schema("--tool", "text-editor", "--max-characters", "10000")
    assert json.loads(run.stdout) == {
        "type": "text_editor_20250728",
        "name": "str_replace_based_edit_tool",
        "max_characters": 10000,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--for", "openai", "--tool", "text-editor"],
            "error: --tool text-editor goes with --for anthropic, not --for openai; it is "
            "Anthropic's own tool: use --for anthropic --tool text-editor\n",
        ),
        (
            ["--for", "mcp", "--tool", "text-editor"],
            "error: --tool text-editor goes with --for anthropic, not --for mcp; it is "
            "Anthropic's own tool: use --for anthropic --tool text-editor\n",
        ),
        (
            ["--tool", "bash"],
            "error: unknown tool 'bash'; use --tool apply-patch, text-editor or search-replace\n",
        ),
        (["--max-characters", "100"], "error: --max-characters is for --tool text-editor only\n"),
        (
            ["--tool", "text-editor", "--max-characters", "0"],
            "error: --max-characters must be 1 or more, not 0\n",
        ),
    ],
    ids=["openai", "mcp", "unknown-tool", "max-characters-without-text-editor", "max-characters-0"],
)
def test_schema_refuses_what_does_not_go_together(args: list[str], message: str) -> None:
    run = schema(*args)
    assert run.exit_code == 2 and run.stdout == ""
    assert run.output == message


def test_approval_is_asked_for_an_edit_not_for_a_view(repo: Repo) -> None:
    asked: list[tuple[str, list[str]]] = []

    def deny(call: Any, plan: Any) -> bool:
        asked.append((call.id, plan.lines()))
        return False

    adapter = ToolCallAdapter(repo.path, approve=deny)
    assert (
        run_one(adapter, tool_use("toolu_V", command="view", path="README.md"))["is_error"] is False
    )
    head = repo.head()
    result = run_one(adapter, tool_use("toolu_E", command="create", path="x.txt", file_text="x\n"))
    assert result["is_error"] is True and result["content"].startswith("Error: ")
    assert asked == [("toolu_E", ["add    x.txt"])]
    assert repo.head() == head and "x.txt" not in repo.files()


def test_a_replayed_edit_after_a_revert_says_so_first_and_what_to_do(repo: Repo) -> None:
    """The harness replays a turn whose edit the user has reverted since: the model reads first
    that nothing ran and the file no longer holds the change, and what to do in this tool's
    terms (it has no attempt argument); a new tool call with the same edit makes it again."""
    adapter = ToolCallAdapter(repo.path)
    edit = {"command": "str_replace", "path": "README.md", "old_str": "# demo", "new_str": "# Demo"}
    first = run_one(adapter, tool_use("toolu_E1", **edit))
    commit = repo.head()
    repo.git("revert", "--no-edit", "HEAD")
    revert = repo.head()
    again = run_one(adapter, tool_use("toolu_E1", **edit))
    assert again["is_error"] is False
    assert again["content"] == (
        f"replayed: this call ({repo.call_ids()[0][:12]}) ran before and made commit "
        f"{commit[:12]} on main; nothing ran now.\n"
        f"reverted: commit {revert[:12]} (git revert) reverted it since: README.md no longer "
        "holds its change.\n"
        "to make this change again, send the same edit in a new tool call (it runs as "
        "attempt 2).\nits stored result:\n" + first["content"]
    )
    assert repo.files()["README.md"].startswith(b"# demo")
    anew = run_one(adapter, tool_use("toolu_E2", **edit))
    assert anew["content"] == first["content"] and repo.files()["README.md"].startswith(b"# Demo")
