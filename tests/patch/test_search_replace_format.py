"""SEARCH/REPLACE blocks parse into the patch model: Aider's, Cline's and Roo's spellings, several
blocks and files in one call, ``auto`` detection, and one-line refusals with a line number.

The cases are written from the tools' public descriptions of their formats (Aider's edit-block
prompt, Cline's ``replace_in_file`` and Roo's ``apply_diff`` tool descriptions).
"""

from __future__ import annotations

import pytest

from applyonce.patch import (
    AddFile,
    PatchSyntaxError,
    UpdateFile,
    detect_format,
    parse,
    parse_search_replace,
)

AIDER = """Here is the change to greet:

src/app.py
```python
<<<<<<< SEARCH
def greet(name):
    return 'hello ' + name
=======
def greet(name):
    return f'hello {name}!'
>>>>>>> REPLACE
```
"""

CLINE = """src/app.py
------- SEARCH
def greet(name):
    return 'hello ' + name
=======
def greet(name):
    return f'hello {name}!'
+++++++ REPLACE
"""

ROO = """src/app.py
<<<<<<< SEARCH
:start_line:1
-------
def greet(name):
    return 'hello ' + name
=======
def greet(name):
    return f'hello {name}!'
>>>>>>> REPLACE
"""


def only_update(text: str) -> UpdateFile:
    (op,) = parse(text).operations
    assert isinstance(op, UpdateFile)
    return op


@pytest.mark.parametrize(
    "text", [AIDER, CLINE, ROO, AIDER.replace("```python\n", "").replace("```\n", "")]
)
def test_the_three_spellings_are_one_change(text: str) -> None:
    op = only_update(text)
    assert op.path == "src/app.py"
    (hunk,) = op.hunks
    assert hunk.block
    assert hunk.old_lines == ["def greet(name):", "    return 'hello ' + name"]
    assert hunk.new_lines == ["def greet(name):", "    return f'hello {name}!'"]
    assert parse(text).model_dump() == parse(AIDER).model_dump()


@pytest.mark.parametrize("text", [AIDER, CLINE, ROO])
def test_auto_detects_the_blocks(text: str) -> None:
    assert detect_format(text) == "search-replace"
    assert parse(text, "search-replace") == parse(text)


def test_a_block_holding_diff_lines_is_still_blocks() -> None:
    # A test file of diffs: its '@@ -' and '--- a/' lines are content, not a unified diff.
    text = "tests/t.py\n<<<<<<< SEARCH\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n=======\n@@ -1,2 +1,2 @@\n>>>>>>> REPLACE\n"
    assert detect_format(text) == "search-replace"
    assert only_update(text).hunks[0].old_lines == ["--- a/x", "+++ b/x", "@@ -1 +1 @@"]


def test_the_diff_of_a_file_losing_a_cline_marker_stays_a_unified_diff() -> None:
    diff = (
        "diff --git a/t.txt b/t.txt\n--- a/t.txt\n+++ b/t.txt\n@@ -1,3 +1,2 @@\n"
        "-------- SEARCH\n a\n b\n"
    )
    assert detect_format(diff) == "unified"
    # Without any header of a diff, the line is Cline's marker.
    assert detect_format(CLINE) == "search-replace"


def test_a_codex_patch_adding_blocks_to_a_file_stays_codex() -> None:
    text = "*** Begin Patch\n*** Add File: x.md\n+<<<<<<< SEARCH\n+=======\n+>>>>>>> REPLACE\n*** End Patch\n"
    assert detect_format(text) == "codex"


def test_several_blocks_and_files_group_by_path_in_order() -> None:
    text = (
        "a.py\n<<<<<<< SEARCH\none\n=======\n1\n>>>>>>> REPLACE\n\n"
        "b.py\n<<<<<<< SEARCH\ntwo\n=======\n2\n>>>>>>> REPLACE\n"
        # No file-name line: the block before's file.
        "<<<<<<< SEARCH\nthree\n=======\n3\n>>>>>>> REPLACE\n"
        "./a.py\n<<<<<<< SEARCH\nfour\n=======\n4\n>>>>>>> REPLACE\n"
    )
    a, b = parse(text).operations
    assert isinstance(a, UpdateFile) and isinstance(b, UpdateFile)
    assert (a.path, [h.old_lines for h in a.hunks]) == ("a.py", [["one"], ["four"]])
    assert (b.path, [h.old_lines for h in b.hunks]) == ("b.py", [["two"], ["three"]])
    assert [h.source_line for h in a.hunks] == [2, 20]


def test_file_names_lose_the_decorations_models_put_around_them() -> None:
    for line in ("`src/app.py`", "**src/app.py**", "# src/app.py", "src/app.py:"):
        assert only_update(AIDER.replace("\nsrc/app.py\n", f"\n{line}\n")).path == "src/app.py"


def test_an_empty_search_creates_the_file_and_refuses_an_existing_one() -> None:
    (op,) = parse(
        "docs/new.md\n<<<<<<< SEARCH\n=======\n# New\n\ntext\n>>>>>>> REPLACE\n"
    ).operations
    assert isinstance(op, AddFile)
    assert op.content == "# New\n\ntext\n"
    assert op.refuse_existing


def test_crlf_patch_text_reads_as_lf() -> None:
    assert parse(CLINE.replace("\n", "\r\n")) == parse(CLINE)


def test_marker_lines_may_have_trailing_spaces_and_aider_s_variants() -> None:
    text = AIDER.replace("<<<<<<< SEARCH\n", "<<<<<<< SEARCH>  \n").replace(
        ">>>>>>> REPLACE\n", ">>>>>>>> REPLACE \n"
    )
    assert parse(text) == parse(AIDER)


def test_a_divider_line_in_the_replace_text_is_content() -> None:
    text = "doc.rst\n<<<<<<< SEARCH\nTitle\n=======\nTitle\n=======\n>>>>>>> REPLACE\n"
    assert only_update(text).hunks[0].new_lines == ["Title", "======="]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "<<<<<<< SEARCH\na\n=======\nb\n>>>>>>> REPLACE\n",
            "patch line 1: the block has no file name",
        ),
        (
            "a.py\n<<<<<<< SEARCH\na\n>>>>>>> REPLACE\n",
            "patch line 4: expected '=======' before '>>>>>>> REPLACE'",
        ),
        ("a.py\n<<<<<<< SEARCH\na\nb\n", "patch line 2: the block has no '=======' line"),
        (
            "a.py\n<<<<<<< SEARCH\na\n=======\nb\n",
            "patch line 2: the block is not closed by a '>>>>>>> REPLACE' line",
        ),
        (
            "a.py\n<<<<<<< SEARCH\na\n=======\nb\n<<<<<<< SEARCH\nc\n=======\nd\n>>>>>>> REPLACE\n",
            "patch line 2: the block is not closed by a '>>>>>>> REPLACE' line",
        ),
        (
            "a.py\n<<<<<<< SEARCH\n=======\nb\n>>>>>>> REPLACE\n"
            "<<<<<<< SEARCH\nb\n=======\nc\n>>>>>>> REPLACE\n",
            "patch line 2: a.py: a block with an empty SEARCH creates the file; it must be the "
            "file's only block",
        ),
    ],
)
def test_malformed_blocks_are_refused_with_their_line(text: str, message: str) -> None:
    with pytest.raises(PatchSyntaxError) as info:
        parse(text, "search-replace")
    assert str(info.value) == message
    assert "\n" not in str(info.value)
    assert info.value.kind == "patch-syntax"
    assert info.value.hint


def test_a_divider_outside_a_block_is_refused() -> None:
    with pytest.raises(PatchSyntaxError) as info:
        parse_search_replace("a.py\n=======\n>>>>>>> REPLACE\n")
    assert str(info.value) == "patch line 2: '=======' outside a block"


def test_text_without_blocks_is_not_this_format() -> None:
    with pytest.raises(PatchSyntaxError, match="not in the search/replace blocks format"):
        parse("src/app.py\nplease change greet\n", "search-replace")


def test_roo_start_line_is_a_hint_outside_the_identity() -> None:
    assert parse(ROO.replace(":start_line:1", ":start_line:40")) == parse(ROO)
