"""The Codex ``apply_patch`` parser: grammar, leniencies, error line numbers, renderer."""

from __future__ import annotations

import pytest

from applyonce.patch import (
    AddFile,
    DeleteFile,
    Hunk,
    HunkLine,
    Patch,
    PatchSyntaxError,
    PatchTooLargeError,
    UpdateFile,
    parse,
    parse_codex,
    render_codex,
)
from applyonce.patch.codex import looks_like_codex


def lines(*spec: str) -> tuple[HunkLine, ...]:
    """``lines(" ctx", "-old", "+new")`` -> hunk lines."""
    return tuple(HunkLine(kind=s[0], text=s[1:]) for s in spec)


def only_update(text: str) -> UpdateFile:
    (op,) = parse_codex(text).operations
    assert isinstance(op, UpdateFile)
    return op


def syntax_error(text: str) -> PatchSyntaxError:
    with pytest.raises(PatchSyntaxError) as info:
        parse_codex(text)
    return info.value


CANONICAL = """*** Begin Patch
*** Add File: docs/new.md
+# Title
+
+body
*** Delete File: old.txt
*** Update File: src/app.py
*** Move to: src/main.py
@@ class App:
@@ def run(self):
 setup()
-run()
+run(fast=True)
@@
 tail
+more
*** End of File
*** End Patch
"""

CANONICAL_MODEL = Patch(
    operations=(
        AddFile(path="docs/new.md", content="# Title\n\nbody\n", refuse_existing=True),
        DeleteFile(path="old.txt"),
        UpdateFile(
            path="src/app.py",
            move_to="src/main.py",
            hunks=(
                Hunk(
                    anchors=("class App:", "def run(self):"),
                    lines=lines(" setup()", "-run()", "+run(fast=True)"),
                ),
                Hunk(lines=lines(" tail", "+more"), end_of_file=True),
            ),
        ),
    )
)


# ---------------------------------------------------------------- grammar


def test_canonical_patch_parses_to_model() -> None:
    assert parse_codex(CANONICAL).model_dump() == CANONICAL_MODEL.model_dump()


def test_render_codex_is_canonical_text() -> None:
    assert render_codex(CANONICAL_MODEL) == CANONICAL


def test_hunk_source_line_is_its_first_header_line() -> None:
    op = parse_codex(CANONICAL).operations[2]
    assert isinstance(op, UpdateFile)
    assert [h.source_line for h in op.hunks] == [9, 14]
    # source_line is bookkeeping, not part of the change
    assert "source_line" not in op.hunks[0].model_dump()


def test_add_file_without_lines_is_empty() -> None:
    patch = parse_codex("*** Begin Patch\n*** Add File: empty.txt\n*** End Patch\n")
    assert patch.operations == (AddFile(path="empty.txt", content="", refuse_existing=True),)


def test_add_file_lines_keep_their_text_verbatim() -> None:
    patch = parse_codex(
        "*** Begin Patch\n*** Add File: a\n+  indented  \n++plus\n+-minus\n+*** End Patch\n"
        "*** End Patch\n"
    )
    assert patch.operations == (
        AddFile(
            path="a", content="  indented  \n+plus\n-minus\n*** End Patch\n", refuse_existing=True
        ),
    )


def test_add_file_line_without_plus_is_an_error() -> None:
    err = syntax_error("*** Begin Patch\n*** Add File: a\n+ok\nnot ok\n*** End Patch\n")
    assert err.details["line"] == 4
    assert "must start with '+'" in err.message


def test_operations_keep_patch_order() -> None:
    patch = parse_codex(
        "*** Begin Patch\n*** Delete File: z\n*** Add File: a\n+x\n*** Delete File: m\n"
        "*** End Patch\n"
    )
    assert [op.path for op in patch.operations] == ["z", "a", "m"]
    assert patch.touched_paths() == ["z", "a", "m"]


def test_move_without_hunks() -> None:
    op = only_update("*** Begin Patch\n*** Update File: a\n*** Move to: b/c\n*** End Patch\n")
    assert (op.path, op.move_to, op.hunks) == ("a", "b/c", ())


def test_touched_paths_includes_move_destination_once() -> None:
    patch = parse_codex(
        "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** Delete File: a\n*** End Patch\n"
    )
    assert patch.touched_paths() == ["a", "b"]


def test_several_hunks_in_one_update() -> None:
    op = only_update(
        "*** Begin Patch\n*** Update File: f\n@@ one\n-a\n+b\n@@ two\n c\n-d\n@@\n+e\n"
        "*** End Patch\n"
    )
    assert [h.anchors for h in op.hunks] == [("one",), ("two",), ()]
    assert [h.lines for h in op.hunks] == [lines("-a", "+b"), lines(" c", "-d"), lines("+e")]


def test_anchor_keeps_its_own_leading_whitespace() -> None:
    # What follows "@@ " is the anchor: "    def f():" names the method, not a top-level def.
    op = only_update("*** Begin Patch\n*** Update File: f\n@@     def f():   \n-a\n*** End Patch\n")
    assert op.hunks[0].anchors == ("    def f():",)  # trailing whitespace dropped, as Codex


def test_bare_at_at_and_at_at_with_spaces_have_no_anchor() -> None:
    op = only_update("*** Begin Patch\n*** Update File: f\n@@   \n-a\n*** End Patch\n")
    assert op.hunks[0].anchors == ()


def test_several_at_at_lines_in_a_row_are_nested_anchors() -> None:
    op = only_update(
        "*** Begin Patch\n*** Update File: f\n@@ class A:\n@@\n@@ def f(self):\n-x\n+y\n"
        "*** End Patch\n"
    )
    (hunk,) = op.hunks
    assert hunk.anchors == ("class A:", "def f(self):")
    assert hunk.source_line == 3


@pytest.mark.parametrize(
    ("header", "anchors"),
    [
        ("@@ -1,3 +1,4 @@ def f():", ("def f():",)),
        ("@@ -12 +12,2 @@   class A:", ("class A:",)),
        ("@@ -1,3 +1,4 @@", ()),
        ("@@ -1,3 +1,4 @@   ", ()),
        # not a range: kept as an anchor
        ("@@ -x +y @@ f", ("-x +y @@ f",)),
        ("@@ 1,3 +1,4 @@ f", ("1,3 +1,4 @@ f",)),
    ],
)
def test_unified_range_in_at_at_line_is_dropped(header: str, anchors: tuple[str, ...]) -> None:
    op = only_update(f"*** Begin Patch\n*** Update File: f\n{header}\n-a\n+b\n*** End Patch\n")
    assert op.hunks[0].anchors == anchors


def test_end_of_file_marker_ends_the_hunk() -> None:
    op = only_update(
        "*** Begin Patch\n*** Update File: f\n@@\n-a\n*** End of File\n@@\n-b\n*** End Patch\n"
    )
    assert [h.end_of_file for h in op.hunks] == [True, False]


def test_hunk_line_that_looks_like_end_patch_is_context() -> None:
    # Only the last non-blank line ends the patch.
    op = only_update(
        "*** Begin Patch\n*** Update File: notes.md\n@@\n *** End Patch\n-x\n*** End Patch\n"
    )
    assert op.hunks[0].lines == lines(" *** End Patch", "-x")


def test_text_after_end_patch_is_an_error() -> None:
    err = syntax_error("*** Begin Patch\n*** Delete File: a\n*** End Patch\ntrailing\n")
    assert err.details["line"] == 4
    assert "last line must be '*** End Patch'" in err.message


# ---------------------------------------------------------------- leniencies

UPDATE_LF = (
    "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-    return 1\n+    return 2\n"
    "*** End Patch\n"
)


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param(UPDATE_LF.replace("\n", "\r\n"), id="crlf"),
        pytest.param(UPDATE_LF.rstrip("\n"), id="no-final-newline"),
        pytest.param(UPDATE_LF.rstrip("\n").replace("\n", "\r\n"), id="crlf-no-final-newline"),
        pytest.param("apply_patch <<'EOF'\n" + UPDATE_LF + "EOF\n", id="heredoc-single-quoted"),
        pytest.param('apply_patch <<"PATCH"\n' + UPDATE_LF + "PATCH\n", id="heredoc-double-quoted"),
        pytest.param("apply_patch << EOF\n" + UPDATE_LF + "EOF", id="heredoc-unquoted"),
        pytest.param("applypatch <<-EOF\n" + UPDATE_LF + "\tEOF\n", id="heredoc-dash-applypatch"),
        pytest.param("<<'EOF'\n" + UPDATE_LF + "EOF\n", id="heredoc-bare-single-quoted"),
        pytest.param("<<EOF\n" + UPDATE_LF + "EOF\n", id="heredoc-bare-unquoted"),
        pytest.param('<<"END_PATCH"\n' + UPDATE_LF + "END_PATCH\n", id="heredoc-bare-any-tag"),
        pytest.param(
            ("\n<<'EOF'\n" + UPDATE_LF + "EOF\n").replace("\n", "\r\n"), id="heredoc-bare-crlf"
        ),
        pytest.param(
            "\n\n  apply_patch <<'EOF'  \r\n" + UPDATE_LF.replace("\n", "\r\n") + "EOF\r\n\n",
            id="heredoc-crlf-blank-lines",
        ),
        pytest.param("\n\n" + UPDATE_LF + "\n\n", id="surrounding-blank-lines"),
        pytest.param(
            "  *** Begin Patch \n\t*** Update File:   a.py  \n@@ def f():\n-    return 1\n"
            "+    return 2\n   *** End Patch\t\n",
            id="padded-markers",
        ),
        pytest.param(
            "*** Begin Patch\n*** Update File: a.py\n@@ -1,2 +1,2 @@ def f():\n-    return 1\n"
            "+    return 2\n*** End Patch\n",
            id="unified-range",
        ),
    ],
)
def test_equivalent_spellings_parse_to_equal_models(spelling: str) -> None:
    assert parse_codex(spelling).model_dump() == parse_codex(UPDATE_LF).model_dump()
    assert parse(spelling).model_dump() == parse_codex(UPDATE_LF).model_dump()


def test_crlf_patch_text_leaves_no_carriage_returns() -> None:
    op = only_update(
        "*** Begin Patch\r\n*** Update File: a\r\n@@\r\n x\r\n-y\r\n+z\r\n*** End Patch\r\n"
    )
    assert all("\r" not in line.text for line in op.hunks[0].lines)
    assert op.path == "a"


def test_heredoc_line_numbers_count_the_wrapper() -> None:
    err = syntax_error(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: a\n@@\nbad\n*** End Patch\nEOF\n"
    )
    assert err.details["line"] == 5


def test_unclosed_heredoc_is_an_error_at_its_opening_line() -> None:
    err = syntax_error("\napply_patch <<'EOF'\n" + UPDATE_LF)
    assert err.details["line"] == 2
    assert "'EOF'" in err.message


def test_heredoc_closed_by_another_tag_is_an_error() -> None:
    err = syntax_error("apply_patch <<'EOF'\n" + UPDATE_LF + "END\n")
    assert err.details["line"] == 1


def test_padded_add_header_inside_a_hunk_starts_a_new_operation() -> None:
    patch = parse_codex(
        "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n    *** Add File: b\n+b\n*** End Patch\n"
    )
    assert [type(op).__name__ for op in patch.operations] == ["UpdateFile", "AddFile"]
    assert patch.operations[1] == AddFile(path="b", content="b\n", refuse_existing=True)


def test_padded_end_of_file_marker() -> None:
    op = only_update(
        "*** Begin Patch\n*** Update File: a\n@@\n-x\n  *** End of File  \n*** End Patch\n"
    )
    assert op.hunks[0].end_of_file is True
    assert op.hunks[0].lines == lines("-x")


def test_padded_move_marker() -> None:
    op = only_update("*** Begin Patch\n*** Update File: a\n   *** Move to:  b \n*** End Patch\n")
    assert op.move_to == "b"


def test_space_before_at_at_is_a_context_line_not_a_header() -> None:
    # " @@ x" is how a file line "@@ x" is spelled as context, so it cannot be a padded header.
    op = only_update("*** Begin Patch\n*** Update File: a.diff\n@@\n @@ x\n-y\n*** End Patch\n")
    assert op.hunks[0].lines == lines(" @@ x", "-y")
    assert op.hunks[0].anchors == ()


def test_first_hunk_without_at_at() -> None:
    op = only_update("*** Begin Patch\n*** Update File: a\n keep\n-old\n+new\n*** End Patch\n")
    # == would also compare source_line; the change itself is what model_dump() shows
    assert [h.model_dump() for h in op.hunks] == [
        Hunk(lines=lines(" keep", "-old", "+new")).model_dump()
    ]
    assert op.hunks[0].source_line == 3


def test_only_the_first_hunk_may_omit_at_at() -> None:
    err = syntax_error(
        "*** Begin Patch\n*** Update File: a\n-x\n*** End of File\n-y\n*** End Patch\n"
    )
    assert err.details["line"] == 5
    assert "expected a hunk header '@@'" in err.message


def test_blank_line_inside_a_hunk_is_empty_context() -> None:
    op = only_update("*** Begin Patch\n*** Update File: a\n@@\n a\n\n-b\n\n c\n*** End Patch\n")
    assert op.hunks[0].lines == lines(" a", " ", "-b", " ", " c")


def test_whitespace_only_line_is_context() -> None:
    op = only_update("*** Begin Patch\n*** Update File: a\n@@\n-b\n   \n\t\n*** End Patch\n")
    # " " prefix, then "  " text; a tab-only line (no prefix) is an empty context line
    assert op.hunks[0].lines == lines("-b", "   ", " ")


def test_blank_lines_before_a_hunk_or_operation_are_padding() -> None:
    patch = parse_codex(
        "*** Begin Patch\n\n*** Update File: a\n\n@@\n-x\n+y\n@@\n-z\n*** End of File\n\n"
        "*** Delete File: b\n\n*** End Patch\n"
    )
    op = patch.operations[0]
    assert isinstance(op, UpdateFile)
    assert [h.lines for h in op.hunks] == [lines("-x", "+y"), lines("-z")]
    assert patch.operations[1] == DeleteFile(path="b")


def test_blank_lines_that_end_a_hunk_are_context_lines() -> None:
    # As Codex reads them: also right before the next "@@", a file header or the end.
    patch = parse_codex(
        "*** Begin Patch\n*** Update File: a\n@@\n-x\n+y\n\n\n@@\n-z\n\n"
        "*** Delete File: b\n*** Update File: c\n@@\n w\n-v\n\n*** End Patch\n"
    )
    a, _, c = patch.operations
    assert isinstance(a, UpdateFile) and isinstance(c, UpdateFile)
    assert [h.lines for h in a.hunks] == [lines("-x", "+y", " ", " "), lines("-z", " ")]
    assert c.hunks[0].lines == lines(" w", "-v", " ")


def test_blank_lines_after_only_added_lines_are_a_separator() -> None:
    # A deliberate difference from Codex: "+x" then a blank line is a pure addition.
    op = only_update("*** Begin Patch\n*** Update File: a\n@@\n+x\n+y\n\n\n*** End Patch\n")
    assert op.hunks[0].lines == lines("+x", "+y")
    # A single space is a context line, as everywhere; so is a blank line between added lines.
    op = only_update("*** Begin Patch\n*** Update File: a\n@@\n+x\n \n*** End Patch\n")
    assert op.hunks[0].lines == lines("+x", " ")
    op = only_update("*** Begin Patch\n*** Update File: a\n@@\n+x\n\n+y\n*** End Patch\n")
    assert op.hunks[0].lines == lines("+x", " ", "+y")


def test_context_only_hunks_are_accepted() -> None:
    op = only_update("*** Begin Patch\n*** Update File: a\n*** Move to: b\n@@\n x\n*** End Patch\n")
    assert (op.move_to, op.hunks[0].lines) == ("b", lines(" x"))


def test_blank_lines_after_end_of_file_and_move_are_padding() -> None:
    # Regression: these blank lines used to start a hunk ("expected a hunk header").
    patch = parse_codex(
        "*** Begin Patch\n*** Update File: a\n@@\n-x\n*** End of File\n\n"
        "*** Update File: b\n*** Move to: c\n\n*** Update File: d\n@@\n-y\n*** End of File\n\n"
        "*** End Patch\n"
    )
    assert [(op.path, len(op.hunks)) for op in patch.operations if isinstance(op, UpdateFile)] == [
        ("a", 1),
        ("b", 0),
        ("d", 1),
    ]


def test_blank_line_before_a_bare_first_hunk_is_context() -> None:
    op = only_update("*** Begin Patch\n*** Update File: a\n\n-x\n*** End Patch\n")
    assert op.hunks[0].lines == lines(" ", "-x")


def test_header_paths_are_stripped() -> None:
    patch = parse_codex("*** Begin Patch\n*** Delete File:    spaced name.txt   \n*** End Patch\n")
    assert patch.operations == (DeleteFile(path="spaced name.txt"),)


# ---------------------------------------------------------------- errors and their line numbers


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("hello\n*** Begin Patch\n*** Delete File: a\n*** End Patch\n", 1, "first line must be"),
        ("\n\n  oops\n", 3, "first line must be"),
        ("*** Begin Patch\n*** Delete File: a\n", 2, "last line must be"),
        ("*** Begin Patch\n", 1, "last line must be"),
        ("*** Begin Patch\n*** End Patch\n", 1, "no file operations"),
        ("\n*** Begin Patch\n\n\n*** End Patch\n", 2, "no file operations"),
        (
            "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch\n",
            2,
            "expected '*** Add File: '",
        ),
        (
            "*** Begin Patch\n*** Delete File: a\n+stray\n*** End Patch\n",
            3,
            "expected '*** Add File: '",
        ),
        ("*** Begin Patch\n*** Add File:\n+x\n*** End Patch\n", 2, "'*** Add File:' needs a path"),
        (
            "*** Begin Patch\n*** Delete File:   \n*** End Patch\n",
            2,
            "'*** Delete File:' needs a path",
        ),
        (
            "*** Begin Patch\n*** Update File:\n@@\n-x\n*** End Patch\n",
            2,
            "'*** Update File:' needs a path",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** Move to:\n@@\n-x\n*** End Patch\n",
            3,
            "needs a path",
        ),
        ("*** Begin Patch\n*** Update File: a\n*** End Patch\n", 2, "has no hunks"),
        (
            "*** Begin Patch\n*** Update File: a\n*** Delete File: b\n*** End Patch\n",
            2,
            "'*** Update File: a' has no hunks",
        ),
        ("*** Begin Patch\n*** Update File: a\n@@\n*** End Patch\n", 3, "a hunk has no lines"),
        (
            "*** Begin Patch\n*** Update File: a\n@@ x\n@@ y\n*** Delete File: b\n*** End Patch\n",
            3,
            "a hunk has no lines",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n-x\nno prefix\n*** End Patch\n",
            5,
            "must start with",
        ),
        ("*** Begin Patch\n*** Update File: a\n@@\n-x\n*** Move to: b\n*** End Patch\n", 5, "'@@'"),
        ("*** Begin Patch\n*** Add File: a\n+x\n-y\n*** End Patch\n", 4, "must start with '+'"),
    ],
)
def test_syntax_error_line_numbers(text: str, line: int, needle: str) -> None:
    for spelling, offset in (
        (text, 0),
        (text.replace("\n", "\r\n"), 0),
        ("apply_patch <<'X'\n" + text + "X\n", 1),
    ):
        err = syntax_error(spelling)
        assert err.details["line"] == line + offset, (spelling, err.message)
        assert needle in err.message
        assert err.message.startswith(f"patch line {line + offset}: ")
        one = err.one_line()
        assert "\n" not in one and "\r" not in one
        assert one.startswith(err.message)
        assert err.kind == "patch-syntax"


def test_empty_patch_is_an_error() -> None:
    for text in ("", "\n\n", "   \r\n"):
        err = syntax_error(text)
        assert "empty" in err.message
        assert "\n" not in err.one_line()


def test_one_line_hides_newlines_of_the_offending_text() -> None:
    err = syntax_error("*** Begin Patch\n*** Update File: a\n@@\n-x\nweird\rline\n*** End Patch\n")
    assert err.details["line"] == 5
    assert "\r" not in err.one_line() and "\n" not in err.one_line()


def test_to_dict_carries_line() -> None:
    err = syntax_error("*** Begin Patch\n*** Update File: a\n@@\n-x\nbad\n*** End Patch\n")
    as_dict = err.to_dict()
    assert as_dict["kind"] == "patch-syntax"
    assert as_dict["line"] == 5
    assert as_dict["retryable"] is False


# ---------------------------------------------------------------- format detection, parse()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (UPDATE_LF, True),
        ("\n  *** Begin Patch\r\n", True),
        ("apply_patch <<'EOF'\n" + UPDATE_LF + "EOF\n", True),
        ("apply_patch <<'EOF'\n" + UPDATE_LF, True),  # unclosed: still ours, parse reports it
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", False),
        ("", False),
    ],
)
def test_looks_like_codex(text: str, expected: bool) -> None:
    assert looks_like_codex(text) is expected


def test_parse_auto_refuses_unknown_format() -> None:
    with pytest.raises(PatchSyntaxError, match="not recognised"):
        parse("Please change a to b in x.\n")


def test_parse_codex_format_reports_the_codex_error() -> None:
    with pytest.raises(PatchSyntaxError, match="first line must be"):
        parse("--- a/x\n", format="codex")


def test_parse_codex_text_as_unified_names_the_format_tried() -> None:
    with pytest.raises(PatchSyntaxError, match=r"not in the unified diff format \(tried: unified"):
        parse(UPDATE_LF, format="unified")


def test_parse_refuses_patch_over_32_mib() -> None:
    big = (
        "*** Begin Patch\n*** Add File: a\n" + "+" + "x" * (32 * 1024 * 1024) + "\n*** End Patch\n"
    )
    with pytest.raises(PatchTooLargeError):
        parse(big)
