"""Text-editor commands as JSON: the parser, the command applier, and planning them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from applyonce.core.paths import UnsafePathError
from applyonce.core.plan import MODE_EXEC, PlanError, plan
from applyonce.patch import (
    AddFile,
    BinaryFileError,
    CreateCommand,
    DeleteCommand,
    DeleteFile,
    EditCommandError,
    EditFile,
    InsertCommand,
    PatchSyntaxError,
    StrReplaceCommand,
    apply_edit_commands,
    parse,
    parse_edit_json,
)
from tests.support.dirreader import DirReader


def commands(*items: dict[str, Any]) -> str:
    return json.dumps(list(items))


def syntax_error(text: str) -> PatchSyntaxError:
    with pytest.raises(PatchSyntaxError) as info:
        parse_edit_json(text)
    assert "\n" not in info.value.one_line()
    return info.value


def run(data: bytes | None, *cmds: Any) -> bytes | None:
    return apply_edit_commands(data, cmds, path="f.txt")


def edit_error(data: bytes | None, *cmds: Any) -> EditCommandError:
    with pytest.raises(EditCommandError) as info:
        run(data, *cmds)
    assert "\n" not in info.value.one_line()
    return info.value


# ---------------------------------------------------------------- the parser


def test_document_shapes_parse_alike() -> None:
    cmd = {"command": "str_replace", "path": "a.py", "old_str": "x", "new_str": "y"}
    as_list = parse_edit_json(json.dumps([cmd]))
    assert parse_edit_json(json.dumps({"commands": [cmd]})) == as_list
    assert parse_edit_json(json.dumps(cmd)) == as_list
    assert as_list.operations == (
        EditFile(path="a.py", commands=(StrReplaceCommand(old_str="x", new_str="y", index=0),)),
    )


def test_a_lone_create_or_delete_is_the_codex_operation() -> None:
    patch = parse_edit_json(
        commands(
            {"command": "create", "path": "n.txt", "file_text": "new\n"},
            {"command": "delete", "path": "old.txt"},
        )
    )
    assert patch.operations == (
        AddFile(path="n.txt", content="new\n", refuse_existing=True),
        DeleteFile(path="old.txt"),
    )


def test_commands_on_one_path_become_one_operation_in_order() -> None:
    patch = parse_edit_json(
        commands(
            {"command": "create", "path": "./a//b.py", "file_text": "x\n"},
            {"command": "str_replace", "path": "c.py", "old_str": "1"},
            {"command": "insert", "path": "a/b.py", "insert_line": 1, "new_str": "y"},
            {"command": "delete", "path": "a/./b.py"},
        )
    )
    first, second = patch.operations
    assert isinstance(first, EditFile) and isinstance(second, EditFile)
    assert first.path == "./a//b.py"  # the first spelling; identity normalises it
    assert first.commands == (
        CreateCommand(file_text="x\n", index=0),
        InsertCommand(insert_line=1, insert_text="y", index=2),
        DeleteCommand(index=3),
    )
    assert second.commands == (StrReplaceCommand(old_str="1", new_str="", index=1),)


def test_command_indexes_are_not_in_the_dump() -> None:
    op = parse_edit_json(commands({"command": "str_replace", "path": "a", "old_str": "x"}))
    assert op.model_dump(mode="json")["operations"][0]["commands"] == [
        {"command": "str_replace", "old_str": "x", "new_str": ""}
    ]


def test_absolute_and_relative_spellings_stay_apart() -> None:
    patch = parse_edit_json(
        commands(
            {"command": "str_replace", "path": "/a.py", "old_str": "x"},
            {"command": "str_replace", "path": "a.py", "old_str": "y"},
        )
    )
    assert [op.path for op in patch.operations] == ["/a.py", "a.py"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[{", "invalid JSON: "),
        ("[]", "the list of edit commands is empty"),
        ('"create"', "must be a JSON list, not a string"),
        ('{"edits": []}', "needs one key, 'commands' (found 'edits')"),
        ('{"commands": {"command": "create"}}', "must be a JSON list, not an object"),
        ("[3]", "commands[0] is a number, not a JSON object"),
        ('[{"path": "a"}]', "commands[0] has no 'command' field"),
        ('[{"command": "view", "path": "a"}]', "commands[0]: unknown command 'view'"),
        ('[{"command": "undo_edit", "path": "a"}]', "commands[0]: unknown command 'undo_edit'"),
        ('[{"command": 7, "path": "a"}]', "commands[0]: unknown command '7'"),
        ('[{"command": "create", "path": "a"}]', "commands[0] (create): missing field 'file_text'"),
        ('[{"command": "delete"}]', "commands[0] (delete): missing field 'path'"),
        ('[{"command": "delete", "path": ""}]', "commands[0] (delete): field 'path'"),
        ('[{"command": "delete", "path": "a", "x": 1}]', "commands[0] (delete): unknown field 'x'"),
        (
            '[{"command": "str_replace", "path": "a", "old_str": ""}]',
            "commands[0] (str_replace): field 'old_str'",
        ),
        (
            '[{"command": "str_replace", "path": "a", "old_str": 1}]',
            "commands[0] (str_replace): field 'old_str'",
        ),
        (
            '[{"command": "insert", "path": "a", "insert_line": -1, "insert_text": "x"}]',
            "commands[0] (insert): field 'insert_line'",
        ),
        (
            '[{"command": "insert", "path": "a", "insert_line": "2", "insert_text": "x"}]',
            "commands[0] (insert): field 'insert_line'",
        ),
        (
            '[{"command": "insert", "path": "a", "insert_line": true, "insert_text": "x"}]',
            "commands[0] (insert): field 'insert_line'",
        ),
        (
            '[{"command": "insert", "path": "a", "insert_line": 1.5, "insert_text": "x"}]',
            "commands[0] (insert): field 'insert_line'",
        ),
        (
            '[{"command": "insert", "path": "a", "insert_line": 1}]',
            "commands[0] (insert): give the text to insert as 'insert_text' (or 'new_str'), once",
        ),
        (
            '[{"command": "insert", "path": "a", "insert_line": 1, "insert_text": "x", "new_str": "y"}]',
            "commands[0] (insert): give the text to insert",
        ),
        (
            '[{"command": "delete", "path": "a"}, {"command": "remove", "path": "b"}]',
            "commands[1]: unknown command 'remove'",
        ),
    ],
)
def test_refusals_name_the_command_index(text: str, message: str) -> None:
    err = syntax_error(text)
    assert message in err.message, err.message
    if "commands[" in message:
        assert err.details["command"] == int(message.split("[")[1].split("]")[0])


def test_auto_detects_json_and_explicit_format_reads_it() -> None:
    text = commands({"command": "delete", "path": "a"})
    assert parse(text) == parse(text, "edit-json") == parse_edit_json(text)


# ---------------------------------------------------------------- applying commands


def test_str_replace_matches_a_substring_exactly_once() -> None:
    data = b"total = price * qty\n"
    assert run(data, StrReplaceCommand(old_str="price * qty", new_str="p")) == b"total = p\n"
    assert run(data, StrReplaceCommand(old_str="qty\n")) == b"total = price * "


def test_str_replace_reports_the_count_and_the_lines() -> None:
    data = b"x = 1\ny\nx = 1\nx = 1\n"
    err = edit_error(data, StrReplaceCommand(old_str="x = 1", new_str="z", index=4))
    assert err.message == (
        "f.txt: commands[4] (str_replace): old_str occurs 3 times (lines 1, 3, 4); "
        "it must occur exactly once"
    )
    assert err.details == {"path": "f.txt", "command": 4, "count": 3, "lines": [1, 3, 4]}
    assert err.hint == "include more of the surrounding text in old_str so it matches one place"
    missing = edit_error(data, StrReplaceCommand(old_str="x = 2"))
    assert (
        missing.message
        == "f.txt: (str_replace): old_str occurs 0 times; it must occur exactly once"
    )
    assert missing.details["count"] == 0
    assert missing.hint == "re-read the file and copy old_str from it exactly, whitespace included"


def test_overlapping_occurrences_count() -> None:
    assert edit_error(b"aaa", StrReplaceCommand(old_str="aa")).details["count"] == 2


def test_str_replace_in_a_crlf_file_with_lf_old_str() -> None:
    data = b"a\r\nb\r\nc\r\n"
    assert run(data, StrReplaceCommand(old_str="a\nb", new_str="A\nB\nB2")) == (
        b"A\r\nB\r\nB2\r\nc\r\n"
    )


def test_bom_is_kept_and_invisible() -> None:
    data = b"\xef\xbb\xbfone\ntwo\n"
    assert run(data, StrReplaceCommand(old_str="one", new_str="1")) == b"\xef\xbb\xbf1\ntwo\n"
    assert run(data, InsertCommand(insert_line=0, insert_text="zero")) == (
        b"\xef\xbb\xbfzero\none\ntwo\n"
    )


@pytest.mark.parametrize(
    ("data", "line", "text", "expected"),
    [
        (b"a\nb\n", 0, "x\n", b"x\na\nb\n"),
        (b"a\nb\n", 1, "x", b"a\nx\nb\n"),
        (b"a\nb\n", 2, "x\ny\n", b"a\nb\nx\ny\n"),
        (b"a\nb", 2, "x", b"a\nb\nx"),
        (b"a\r\nb\r\n", 1, "x\ny", b"a\r\nx\r\ny\r\nb\r\n"),
        (b"", 0, "first", b"first\n"),
        (b"a\n", 1, "\n", b"a\n\n"),
    ],
    ids=["top", "middle", "end", "end-no-newline", "crlf", "empty-file", "blank-line"],
)
def test_insert_puts_whole_lines_after_insert_line(
    data: bytes, line: int, text: str, expected: bytes
) -> None:
    assert run(data, InsertCommand(insert_line=line, insert_text=text)) == expected


def test_insert_line_out_of_range_names_the_line_count() -> None:
    err = edit_error(b"1\n2\n3", InsertCommand(insert_line=4, insert_text="x", index=0))
    assert err.message == (
        "f.txt: commands[0] (insert): insert_line 4 is out of range; f.txt has 3 lines (use 0 to 3)"
    )
    assert err.details["line_count"] == 3


def test_commands_apply_in_order_and_create_and_delete_skip_the_old_content() -> None:
    assert (
        run(
            b"\x00binary",
            DeleteCommand(),
            CreateCommand(file_text="a\n", index=1),
            StrReplaceCommand(old_str="a", new_str="b"),
            InsertCommand(insert_line=1, insert_text="c"),
        )
        == b"b\nc\n"
    )
    assert run(b"\x00binary", DeleteCommand()) is None
    assert run(None, CreateCommand(file_text="a\n")) == b"a\n"
    assert (
        run(None, CreateCommand(file_text=""), DeleteCommand(), CreateCommand(file_text="z"))
        == b"z"
    )


def test_editing_a_binary_file_or_a_missing_one_is_refused() -> None:
    with pytest.raises(BinaryFileError):
        run(b"\x00\x01", StrReplaceCommand(old_str="x"))
    assert (
        "cannot edit f.txt: no such file"
        in edit_error(None, InsertCommand(insert_line=0, insert_text="x")).message
    )
    assert (
        "cannot delete f.txt: no such file"
        in edit_error(b"x", DeleteCommand(), DeleteCommand(index=1)).message
    )


def test_a_create_of_a_file_that_is_there_is_refused() -> None:
    """Never an overwrite by surprise (Anthropic's reference editor refuses it too)."""
    error = edit_error(b"x\n", CreateCommand(file_text="y\n"))
    assert "cannot create f.txt: it already exists" in error.message
    assert error.hint == "change it with str_replace or insert instead, or delete it first"
    error = edit_error(None, CreateCommand(file_text="a"), CreateCommand(file_text="b", index=1))
    assert "commands[1] (create): cannot create f.txt: it already exists" in error.message


# ---------------------------------------------------------------- planning


def plan_json(root: Path, *items: dict[str, Any]):  # type: ignore[no-untyped-def]
    return plan(parse_edit_json(commands(*items)), DirReader(root))


def test_plan_actions_follow_the_file_before_and_after(tmp_path: Path) -> None:
    (tmp_path / "keep.sh").write_bytes(b"echo 1\n")
    (tmp_path / "keep.sh").chmod(0o755)
    (tmp_path / "gone.txt").write_bytes(b"x\n")
    tree_plan = plan_json(
        tmp_path,
        {"command": "str_replace", "path": "keep.sh", "old_str": "1", "new_str": "2"},
        {"command": "create", "path": "new.txt", "file_text": "n\n"},
        {"command": "insert", "path": "new.txt", "insert_line": 1, "insert_text": "m"},
        {"command": "str_replace", "path": "gone.txt", "old_str": "x", "new_str": "y"},
        {"command": "delete", "path": "gone.txt"},
    )
    assert [(c.path, c.action, c.content, c.mode) for c in tree_plan.changes] == [
        ("keep.sh", "update", b"echo 2\n", MODE_EXEC),
        ("new.txt", "add", b"n\nm\n", 0o100644),
        ("gone.txt", "delete", None, 0o100644),
    ]
    assert tree_plan.removed == ("gone.txt",)


def test_plan_refuses_a_list_that_changes_nothing(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="the patch changes nothing"):
        plan_json(
            tmp_path,
            {"command": "create", "path": "t.txt", "file_text": "t"},
            {"command": "delete", "path": "t.txt"},
        )


def test_plan_edits_through_symlinks_only_by_replacing_them(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_bytes(b"real\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    with pytest.raises(UnsafePathError, match=r"cannot edit link\.txt: it is a symlink"):
        plan_json(tmp_path, {"command": "str_replace", "path": "link.txt", "old_str": "real"})
    tree_plan = plan_json(
        tmp_path,
        {"command": "delete", "path": "link.txt"},
        {"command": "create", "path": "link.txt", "file_text": "own\n"},
        {"command": "str_replace", "path": "link.txt", "old_str": "own", "new_str": "mine"},
    )
    assert [(c.path, c.action, c.content) for c in tree_plan.changes] == [
        ("link.txt", "add", b"mine\n")
    ]
    assert (tmp_path / "real.txt").read_bytes() == b"real\n"


def test_plan_refuses_editing_a_directory(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    with pytest.raises(PlanError, match="cannot edit d: it is a dir"):
        plan_json(
            tmp_path,
            {"command": "create", "path": "d", "file_text": ""},
            {"command": "delete", "path": "d"},
        )
