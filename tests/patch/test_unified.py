"""The unified-diff parser: headers, names and prefixes, hunks, markers, leniencies and refusals."""

from __future__ import annotations

import pytest

from applyonce.patch import (
    AddFile,
    BinaryPatchError,
    CopyFile,
    DeleteFile,
    Hunk,
    HunkLine,
    PatchSyntaxError,
    UnsupportedModeError,
    UpdateFile,
    detect_format,
    looks_like_unified,
    parse,
    parse_unified,
)
from applyonce.patch.unified import unquote_c_style


def lines(*spec: str) -> tuple[HunkLine, ...]:
    return tuple(HunkLine(kind=s[0], text=s[1:]) for s in spec)  # type: ignore[arg-type]


def only(text: str) -> object:
    (op,) = parse_unified(text).operations
    return op


def only_update(text: str) -> UpdateFile:
    op = only(text)
    assert isinstance(op, UpdateFile)
    return op


def syntax_error(text: str) -> PatchSyntaxError:
    with pytest.raises(PatchSyntaxError) as info:
        parse_unified(text)
    assert "\n" not in info.value.one_line()
    return info.value


SIMPLE = """diff --git a/src/app.py b/src/app.py
index 3220b2b..12f3153 100644
--- a/src/app.py
+++ b/src/app.py
@@ -10,4 +10,4 @@ def greet(name):
 def greet(name):
-    return "hi " + name
+    return f"Hello, {name}!"
 
 
"""


# ---------------------------------------------------------------- hunks


def test_git_diff_update_becomes_an_update_with_hinted_hunks() -> None:
    op = only_update(SIMPLE)
    assert op.path == "src/app.py" and op.move_to is None and op.mode is None
    (hunk,) = op.hunks
    assert hunk.lines == lines(
        " def greet(name):", '-    return "hi " + name', '+    return f"Hello, {name}!"', " ", " "
    )
    # The label after '@@' is git's function name, not an anchor; the numbers are hints.
    assert hunk.anchors == ()
    assert (hunk.old_start, hunk.new_start, hunk.source_line) == (10, 10, 5)


def test_line_numbers_are_in_the_dump_and_source_lines_are_not() -> None:
    # The line numbers pick the place where the context is not unique: part of the change.
    dumped = only_update(SIMPLE).model_dump()
    assert set(dumped["hunks"][0]) == {"anchors", "lines", "end_of_file", "old_start", "new_start"}
    assert (dumped["hunks"][0]["old_start"], dumped["hunks"][0]["new_start"]) == (10, 10)
    assert set(dumped) == {"op", "path", "move_to", "hunks"}


def test_counts_default_to_one_and_several_hunks_are_read_in_order() -> None:
    op = only_update("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n@@ -5,2 +5,3 @@\n e\n+E\n f\n")
    assert [h.lines for h in op.hunks] == [lines("-a", "+A"), lines(" e", "+E", " f")]
    assert [(h.old_start, h.new_start) for h in op.hunks] == [(1, 1), (5, 5)]


def test_a_removed_line_that_looks_like_a_header_is_read_by_the_counts() -> None:
    op = only_update("--- a/f\n+++ b/f\n@@ -1,2 +1,1 @@\n--- x\n-+++ y\n+z\n")
    assert op.hunks[0].lines == lines("--- x", "-+++ y", "+z")


def test_an_empty_line_in_a_hunk_is_an_empty_context_line() -> None:
    op = only_update("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+B\n")
    assert op.hunks[0].lines == lines(" a", " ", "-b", "+B")


def test_crlf_patch_text_reads_as_lf() -> None:
    # Every line, headers included, ends in CRLF: the text was converted in transport.
    crlf, lf = parse_unified(SIMPLE.replace("\n", "\r\n")), parse_unified(SIMPLE)
    assert crlf.model_dump() == lf.model_dump()
    (op,) = crlf.operations
    assert isinstance(op, UpdateFile) and "\r" not in op.hunks[0].lines[0].text


def test_cr_is_content_unless_every_line_ends_in_crlf() -> None:
    # git's diff of a CRLF file: LF headers, CRLF content lines. The "\r" belongs to the lines.
    text = "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\r\n-b\n+B\r\n"
    (op,) = parse_unified(text).operations
    assert isinstance(op, UpdateFile)
    texts = [line.text for line in op.hunks[0].lines]
    assert "a\r" in texts and "B\r" in texts


@pytest.mark.parametrize(
    ("body", "old_eof", "new_eof"),
    [
        (" a\n-b\n\\ No newline at end of file\n+B\n", True, False),
        (" a\n-b\n+B\n\\ No newline at end of file\n", False, True),
        (" a\n-b\n\\ No newline at end of file\n+B\n\\ No newline at end of file\n", True, True),
        ("-a\n+A\n b\n\\ No newline at end of file\n", True, True),
    ],
    ids=["old-only", "new-only", "both-changed", "context-line"],
)
def test_no_newline_marker_applies_to_the_line_before_it(
    body: str, old_eof: bool, new_eof: bool
) -> None:
    (hunk,) = only_update("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n" + body).hunks
    assert (hunk.old_no_final_newline, hunk.new_no_final_newline) == (old_eof, new_eof)
    assert hunk.model_dump().get("old_no_final_newline", False) is old_eof


def test_a_line_after_the_no_newline_marker_is_refused() -> None:
    err = syntax_error(
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n-a\n\\ No newline at end of file\n b\n+B\n"
    )
    assert "follows the file's last line" in err.message


def test_a_hunk_after_the_no_newline_marker_is_refused() -> None:
    err = syntax_error(
        "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+A\n"
        "\\ No newline at end of file\n@@ -3 +3 @@\n-c\n+C\n"
    )
    assert "ends the file" in err.message


# ---------------------------------------------------------------- miscounted hunks (recount)


def test_undercounted_hunk_is_read_up_to_the_next_header() -> None:
    patch = parse_unified(
        "--- a/m\n+++ b/m\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n c\n-d\n+D\n"
        "--- a/n\n+++ b/n\n@@ -1 +1 @@\n-1\n+one\n"
    )
    first, second = patch.operations
    assert isinstance(first, UpdateFile) and isinstance(second, UpdateFile)
    assert first.hunks[0].lines == lines(" a", "-b", "+B", " c", "-d", "+D")
    assert second.hunks[0].lines == lines("-1", "+one")


def test_overcounted_hunk_ends_at_the_next_header_and_drops_padding() -> None:
    patch = parse_unified(
        "--- a/m\n+++ b/m\n@@ -1,9 +1,9 @@\n a\n-b\n+B\n\n\ndiff --git a/n b/n\n--- a/n\n+++ b/n\n"
        "@@ -1 +1 @@\n-1\n+one\n"
    )
    first = patch.operations[0]
    assert isinstance(first, UpdateFile)
    assert first.hunks[0].lines == lines(" a", "-b", "+B")
    assert len(patch.operations) == 2


def test_lines_that_look_like_a_header_inside_the_counts_are_hunk_lines() -> None:
    # "--- x" / "+++ y" then a hunk header: a removed "-- x" and an added "++ y" ending a hunk
    # that the next hunk follows. The counts say so.
    op = only_update("--- a/m\n+++ b/m\n@@ -1,2 +1,2 @@\n a\n--- x\n+++ y\n@@ -5 +5 @@\n-e\n+E\n")
    assert [h.lines for h in op.hunks] == [lines(" a", "--- x", "+++ y"), lines("-e", "+E")]


def test_signature_after_a_counted_hunk_is_not_a_continuation() -> None:
    op = only_update("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n-- \n2.39.5\n")
    assert op.hunks[0].lines == lines("-a", "+A")


def test_blank_lines_between_hunks_of_a_file_are_skipped() -> None:
    op = only_update("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+A\n\n@@ -3 +3 @@\n-c\n+C\n")
    assert len(op.hunks) == 2


# ---------------------------------------------------------------- names and prefixes


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("diff --git a/x/y.txt b/x/y.txt\n--- a/x/y.txt\n+++ b/x/y.txt\n", "x/y.txt"),
        # git diff --no-prefix: git apply's -p1 takes the first directory off too
        ("diff --git x/y.txt x/y.txt\n--- x/y.txt\n+++ x/y.txt\n", "y.txt"),
        ("diff --git a/b/c b/b/c\n--- a/b/c\n+++ b/b/c\n", "b/c"),
        ("diff --git a/c a/c\n--- a/c\n+++ a/c\n", "c"),  # --no-prefix, a directory named a
        ("diff --git c/x w/x\n--- c/x\n+++ w/x\n", "x"),  # diff.mnemonicPrefix
        (
            "--- orig/conf/a.ini\t2024-05-01 10:00:00 +0200\n+++ new/conf/a.ini\t2024-05-01\n",
            "conf/a.ini",
        ),  # diff -ru with timestamps
        ("--- a.txt\n+++ a.txt\n", "a.txt"),
        ("diff --git a/sp ace/f b/sp ace/f\n--- a/sp ace/f\t\n+++ b/sp ace/f\t\n", "sp ace/f"),
    ],
    ids=["a-b", "no-prefix", "dir-named-b", "dir-named-a", "mnemonic", "diff-u", "bare", "spaces"],
)
def test_prefixes_are_recognised_from_the_pair_of_names(header: str, expected: str) -> None:
    assert only_update(header + "@@ -1 +1 @@\n-x\n+y\n").path == expected


def test_quoted_names_are_unescaped_as_utf8() -> None:
    text = (
        'diff --git "a/caf\\303\\251 \\"x\\".txt" "b/caf\\303\\251 \\"x\\".txt"\n'
        '--- "a/caf\\303\\251 \\"x\\".txt"\t\n+++ "b/caf\\303\\251 \\"x\\".txt"\t\n'
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert only_update(text).path == 'caf\u00e9 "x".txt'


@pytest.mark.parametrize(
    ("quoted", "name"),
    [
        ('"a\\tb"', "a\tb"),
        ('"back\\\\slash"', "back\\slash"),
        ('"\\342\\202\\254"', "\u20ac"),
        ('"q\\"q" rest', 'q"q'),
    ],
)
def test_unquote_c_style(quoted: str, name: str) -> None:
    assert unquote_c_style(quoted)[0] == name


@pytest.mark.parametrize("quoted", ['"open', '"bad \\q"', '"\\377\\376"'])
def test_unquote_c_style_refuses_bad_names(quoted: str) -> None:
    with pytest.raises(ValueError):
        unquote_c_style(quoted)


def test_a_bad_quoted_name_is_a_syntax_error_with_its_line() -> None:
    err = syntax_error('diff --git a/x b/x\n--- "a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n')
    assert err.details["line"] == 2


def test_plain_headers_strip_one_component_unless_the_first_names_have_none() -> None:
    # git apply's -p1, whatever the first components are ...
    patch = parse_unified(
        "--- b/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/new\n@@ -0,0 +1 @@\n+n\n"
    )
    assert [op.path for op in patch.operations] == ["x", "new"]
    # ... but names without a '/' (diff -u file.orig file) make it -p0, for the rest of the diff.
    patch = parse_unified(
        "--- f.orig\n+++ f\n@@ -1 +1 @@\n-a\n+b\n--- /dev/null\n+++ b/new\n@@ -0,0 +1 @@\n+n\n"
    )
    assert [op.path for op in patch.operations] == ["f", "b/new"]
    alone = parse_unified("--- /dev/null\n+++ new\n@@ -0,0 +1 @@\n+n\n")
    assert alone.operations == (AddFile(path="new", content="n\n", refuse_existing=True),)


@pytest.mark.parametrize(
    ("headers", "path"),
    [
        ("--- f.orig\n+++ f\n", "f"),  # diff -u f.orig f
        ("--- f\n+++ f.new\n", "f"),  # the shorter name, when the other only adds to it
        ("--- a/x\n+++ b/y\n", "y"),  # one name for both sides: the new side's
        ("--- x.txt\n+++ b/x.txt\n", "x.txt"),
        (
            "--- old/conf/a.ini\t2024-05-01 10:00:00 +0200\n+++ new/conf/a.ini\t2024-05-01\n",
            "conf/a.ini",
        ),
    ],
)
def test_plain_headers_name_one_file_as_git_apply_does(headers: str, path: str) -> None:
    op = only_update(headers + "@@ -1 +1 @@\n-a\n+b\n")
    assert (op.path, op.move_to) == (path, None)


@pytest.mark.parametrize(
    "text",
    [
        "diff --git x x\n--- x\n+++ x\n@@ -1 +1 @@\n-a\n+b\n",  # --no-prefix, top-level file
        "diff --git x x\nold mode 100644\nnew mode 100755\n",
    ],
    ids=["no-prefix-top-level", "no-prefix-mode-change"],
)
def test_git_names_without_a_component_to_strip_are_refused(text: str) -> None:
    # git apply: "git diff header lacks filename information when removing 1 leading pathname
    # component"
    err = syntax_error(text)
    assert "cannot tell the file's name" in err.message
    assert err.details["line"] == 1


def test_names_without_a_slash_in_the_first_plain_header_make_git_sections_p0_too() -> None:
    patch = parse_unified(
        "--- a.txt\n+++ a.txt\n@@ -1 +1 @@\n-a\n+b\n--- d/b.txt\n+++ d/b.txt\n@@ -1 +1 @@\n-a\n+b\n"
        "diff --git y y\nold mode 100644\nnew mode 100755\n"
    )
    assert [op.path for op in patch.operations] == ["a.txt", "d/b.txt", "y"]


# ---------------------------------------------------------------- file operations


def test_new_file_is_an_add_with_its_mode() -> None:
    op = only(
        "diff --git a/run.sh b/run.sh\nnew file mode 100755\nindex 0000000..1\n--- /dev/null\n"
        "+++ b/run.sh\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+echo hi\n"
    )
    assert op == AddFile(
        path="run.sh", content="#!/bin/sh\necho hi\n", mode="100755", refuse_existing=True
    )


def test_new_regular_file_dumps_like_a_codex_add() -> None:
    op = only(
        "diff --git a/n b/n\nnew file mode 100644\n--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x\n"
    )
    assert op.model_dump() == {"op": "add", "path": "n", "content": "x\n"}  # type: ignore[attr-defined]


def test_new_empty_file_and_new_file_without_final_newline() -> None:
    assert only("diff --git a/e b/e\nnew file mode 100644\nindex 0000000..e69de29\n") == AddFile(
        path="e", content="", refuse_existing=True
    )
    op = only("--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n")
    assert op == AddFile(path="n", content="a\nb", refuse_existing=True)


def test_deleted_file_keeps_its_lines_as_an_excluded_precondition() -> None:
    op = only(
        "diff --git a/d b/d\ndeleted file mode 100644\n--- a/d\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-1\n-2\n"
    )
    assert isinstance(op, DeleteFile)
    assert op.path == "d"
    assert op.expected is not None and op.expected[0].lines == lines("-1", "-2")
    assert op.model_dump() == {"op": "delete", "path": "d"}


def test_mode_change_only() -> None:
    op = only_update("diff --git a/s.sh b/s.sh\nold mode 100644\nnew mode 100755\n")
    assert (op.path, op.hunks, op.mode) == ("s.sh", (), "100755")
    assert op.model_dump()["mode"] == "100755"


def test_rename_without_and_with_hunks() -> None:
    pure = only_update(
        "diff --git a/old name.txt b/new name.txt\nsimilarity index 100%\n"
        "rename from old name.txt\nrename to new name.txt\n"
    )
    assert (pure.path, pure.move_to, pure.hunks) == ("old name.txt", "new name.txt", ())
    edited = only_update(
        "diff --git a/a b/b\nsimilarity index 80%\nrename from a\nrename to b\n"
        "old mode 100644\nnew mode 100755\n--- a/a\n+++ b/b\n@@ -1 +1 @@\n-x\n+y\n"
    )
    assert (edited.path, edited.move_to, edited.mode) == ("a", "b", "100755")
    assert edited.hunks[0].lines == lines("-x", "+y")


def test_copy_becomes_a_copy_operation() -> None:
    op = only(
        "diff --git a/t.cfg b/p.cfg\nsimilarity index 90%\ncopy from t.cfg\ncopy to p.cfg\n"
        "--- a/t.cfg\n+++ b/p.cfg\n@@ -1 +1 @@\n-k = 1\n+k = 2\n"
    )
    assert isinstance(op, CopyFile)
    assert (op.path, op.copy_to) == ("t.cfg", "p.cfg")
    assert op.hunks[0].lines == lines("-k = 1", "+k = 2")


def test_text_around_the_diff_is_skipped() -> None:
    mail = "From abc Mon Sep 17 00:00:00 2001\nSubject: x\n\nwhy\n---\n f | 2 +-\n\n" + SIMPLE
    with_mail = parse_unified(mail + "-- \n2.39.5\n\n")
    assert with_mail.model_dump() == parse_unified(SIMPLE).model_dump()
    assert with_mail.operations[0].hunks[0].source_line == 12  # type: ignore[union-attr]


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "header",
    ["@@ -1 +1 @", "@@ -a,1 +1 @@", "@@ 1,2 1,2 @@", "@@", "@@ -1,2 +1,2"],
)
def test_malformed_hunk_header_is_refused_with_its_line(header: str) -> None:
    err = syntax_error(f"--- a/f\n+++ b/f\n{header}\n-a\n+b\n")
    assert err.details["line"] == 3
    assert err.message == f"patch line 3: malformed hunk header {header!r}"
    assert err.hint == "write hunk headers as '@@ -START,COUNT +START,COUNT @@'"


def test_hunk_before_any_file_header_is_refused() -> None:
    err = syntax_error("some text\n@@ -1 +1 @@\n-a\n+b\n")
    assert err.message == (
        "patch line 2: a unified diff hunk without '---'/'+++' headers before it: the file it "
        "changes is not named"
    )


@pytest.mark.parametrize(
    "body",
    [
        "GIT binary patch\nliteral 5\nMcmZQzU|?imfB*;p\n\nliteral 0\nHcmV?d00001\n\n",
        "Binary files a/img.png and b/img.png differ\n",
    ],
    ids=["git-binary-patch", "binary-files-differ"],
)
def test_binary_patches_are_refused(body: str) -> None:
    with pytest.raises(BinaryPatchError) as info:
        parse_unified("diff --git a/img.png b/img.png\nindex 1234567..89abcde 100644\n" + body)
    err = info.value
    assert err.kind == "binary-patch"
    assert err.one_line() == (
        "patch line 3: img.png has a binary change; applyonce applies text changes only; "
        "leave binary files out of the patch"
    )
    assert err.details == {"line": 3, "path": "img.png"}


@pytest.mark.parametrize(
    ("header", "what"),
    [
        ("new file mode 120000", "a symbolic link (mode 120000)"),
        ("old mode 100644\nnew mode 120000", "a symbolic link (mode 120000)"),
        ("new file mode 160000", "a submodule (mode 160000)"),
    ],
)
def test_symlinks_and_submodules_are_refused(header: str, what: str) -> None:
    with pytest.raises(UnsupportedModeError) as info:
        parse_unified(f"diff --git a/l b/l\n{header}\n")
    assert f"l is {what}" in info.value.message
    assert info.value.kind == "unsupported-mode"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n a\n+b\n",
            "a new file's hunks may only add lines",
        ),
        ("--- a/d\n+++ /dev/null\n@@ -1,2 +0,1 @@\n-a\n b\n", "keep or add lines"),
        ("diff --git a/x b/y\n--- a/x\n+++ b/y\n@@ -1 +1 @@\n-a\n+b\n", "name two files"),
        ("diff --git a/x b/x\nindex 1..2 100644\n", "changes nothing"),
        ("--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n b\n", "changes nothing"),
        ("--- a/x\n+++ b/x\nnot a hunk\n", "without a hunk"),
        ("diff --git a/x b/x\nold mode 10064\nnew mode 100755\n", "bad file mode"),
        ("--- /dev/null\n+++ /dev/null\n@@ -0,0 +1 @@\n+a\n", "both adds and deletes"),
        ("nothing here\n", "no file changes"),
    ],
)
def test_inconsistent_sections_are_refused(text: str, message: str) -> None:
    assert message in syntax_error(text).message


# ---------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (SIMPLE, "unified"),
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", "unified"),
        ("From abc\nSubject: s\n\n" + SIMPLE, "unified"),
        ("@@ -1 +1 @@\n-a\n+b\n", "unified"),
        ("*** Begin Patch\n*** Update File: a\n@@ -1 +1 @@\n-a\n+b\n*** End Patch\n", "codex"),
        ('[{"command": "create", "path": "a", "file_text": ""}]', "edit-json"),
        ('  {"commands": []}', "edit-json"),
        ("--- just a line\n", None),
        ("hello\n", None),
    ],
)
def test_detect_format(text: str, expected: str | None) -> None:
    assert detect_format(text) == expected
    if expected == "unified":
        assert looks_like_unified(text)


def test_parse_auto_reads_a_git_diff() -> None:
    assert parse(SIMPLE) == parse(SIMPLE, "unified") == parse_unified(SIMPLE)


def test_auto_names_every_format_it_tried() -> None:
    with pytest.raises(PatchSyntaxError) as info:
        parse("please fix the bug\n")
    assert info.value.message.startswith(
        "the patch format was not recognised (tried: codex apply_patch, search/replace blocks,"
        " unified diff, edit-json): "
    )


@pytest.mark.parametrize(
    ("text", "format", "label"),
    [
        (SIMPLE, "codex", "codex apply_patch"),
        ("*** Begin Patch\n*** Delete File: a\n*** End Patch\n", "unified", "unified diff"),
        (SIMPLE, "edit-json", "edit-json"),
    ],
)
def test_explicit_format_that_does_not_fit_names_the_format(
    text: str, format: str, label: str
) -> None:
    with pytest.raises(PatchSyntaxError) as info:
        parse(text, format)  # type: ignore[arg-type]
    assert info.value.message.startswith(f"the patch is not in the {label} format (tried: {label})")


def test_hunk_model_round_trips_through_its_dump() -> None:
    hunk = Hunk(lines=lines("-a", "+b"), new_no_final_newline=True, old_start=3, new_start=3)
    again = Hunk.model_validate(hunk.model_dump())
    assert again.new_no_final_newline is True
    assert (again.old_start, again.new_start) == (3, 3)


def test_a_line_number_too_large_is_a_syntax_error_not_a_crash() -> None:
    with pytest.raises(PatchSyntaxError, match="line number over"):
        parse_unified("--- a/f\n+++ b/f\n@@ -2,1 +99999999999999999999999,1 @@\n-a\n+b\n")


# ---------------------------------------------------------------- GNU diff -N's epoch dates


@pytest.mark.parametrize(
    ("stamp", "epoch"),
    [
        ("1970-01-01 00:00:00.000000000 +0000", True),
        ("1970-01-01 00:00:00 +0000", True),
        ("1970-01-01 01:00:00.000000000 +0100", True),
        ("1969-12-31 19:00:00.000000000 -0500", True),
        ("1970-01-01 05:30:00 +05:30", True),
        ("1970-01-01 00:00:01.000000000 +0000", False),  # a second after
        ("1970-01-01 00:00:00.000000001 +0000", False),
        ("1970-01-01 01:00:00.000000000 +0000", False),
        ("2024-05-01 10:00:00.000000000 +0200", False),
        ("1970-01-01", False),
    ],
)
def test_an_epoch_date_on_the_new_side_deletes_the_file(stamp: str, epoch: bool) -> None:
    op = only(
        f"--- old/d.txt\t2024-05-01 10:00:00 +0000\n+++ new/d.txt\t{stamp}\n@@ -1 +0,0 @@\n-x\n"
    )
    if epoch:
        assert isinstance(op, DeleteFile) and op.path == "d.txt"
    else:
        # Not a deletion: an update that leaves the file empty, as git apply reads it.
        assert isinstance(op, UpdateFile) and op.path == "d.txt"


def test_an_epoch_date_on_the_old_side_adds_the_file_which_must_be_new() -> None:
    op = only(
        "--- old/n.txt\t1970-01-01 00:00:00.000000000 +0000\n"
        "+++ new/n.txt\t2024-05-01 10:00:00.000000000 +0000\n@@ -0,0 +1,2 @@\n+a\n+b\n"
    )
    assert op == AddFile(path="n.txt", content="a\nb\n", refuse_existing=True)
    # It dumps as any other add: the precondition is no part of the call's identity.
    assert op.model_dump() == {"op": "add", "path": "n.txt", "content": "a\nb\n"}  # type: ignore[attr-defined]


def test_epoch_dates_in_a_git_section_mean_nothing() -> None:
    # git apply reads them only on plain headers.
    op = only_update(
        "diff --git a/x b/x\n--- a/x\t1970-01-01 00:00:00.000000000 +0000\n+++ b/x\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert op.path == "x"


def test_epoch_creation_whose_hunk_keeps_lines_is_refused() -> None:
    err = syntax_error(
        "--- old/n\t1970-01-01 00:00:00 +0000\n+++ new/n\t2024-05-01 10:00:00 +0000\n"
        "@@ -1 +1,2 @@\n a\n+b\n"
    )
    assert "a new file's hunks may only add lines" in err.message


def test_rename_whose_minus_line_names_another_file_is_refused() -> None:
    # git apply: "bad git-diff - inconsistent old filename"
    err = syntax_error(
        "diff --git e.txt d/c.md\nrename from e.txt\nrename to d/c.md\n--- e.txt\n+++ d/c.md\n"
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    assert err.message.endswith(
        "the headers name two files for one side: e.txt, and e.txt, which has no leading "
        "component for git apply to remove (-p1)"
    )


def test_renames_and_copies_must_not_land_on_a_path_and_do_not_dump_that() -> None:
    op = only_update("diff --git a/a b/b\nsimilarity index 100%\nrename from a\nrename to b\n")
    assert op.refuse_existing
    assert op.model_dump() == {"op": "update", "path": "a", "move_to": "b", "hunks": ()}
