"""Hunks with line numbers (unified diffs) are positioned as ``git apply`` positions them.

And the planner's new operations: file modes, copies, the deletion precondition.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from applyonce.core.paths import UnsafePathError
from applyonce.core.plan import MODE_EXEC, MODE_FILE, PlanError, plan
from applyonce.patch import (
    AddFile,
    CopyFile,
    DeleteFile,
    Hunk,
    HunkApplyError,
    HunkLine,
    MatchLevel,
    Patch,
    UpdateFile,
    apply_hunks,
    parse_unified,
)
from tests.support.dirreader import DirReader


def hunk(
    old_start: int, new_start: int, *spec: str, old_eof: bool = False, new_eof: bool = False
) -> Hunk:
    return Hunk(
        lines=tuple(HunkLine(kind=s[0], text=s[1:]) for s in spec),  # type: ignore[arg-type]
        old_start=old_start,
        new_start=new_start,
        old_no_final_newline=old_eof,
        new_no_final_newline=new_eof,
    )


def apply(data: bytes, *hunks: Hunk) -> bytes:
    return apply_hunks(data, hunks, path="f")[0]


def text(*lines: str, final_newline: bool = True) -> bytes:
    return ("\n".join(lines) + ("\n" if final_newline else "")).encode()


# ---------------------------------------------------------------- where a hunk goes

REPEATED = text("top", "x", "y", "z", "m1", "m2", "x", "y", "z", "end")  # "x y z" at 1 and 6


@pytest.mark.parametrize(
    ("new_start", "expected"),
    [
        (3, text("top", "x", "Y", "z", "m1", "m2", "x", "y", "z", "end")),
        (6, text("top", "x", "y", "z", "m1", "m2", "x", "Y", "z", "end")),
    ],
    ids=["nearer-first", "nearer-second"],
)
def test_the_match_nearest_to_the_hinted_line_wins(new_start: int, expected: bytes) -> None:
    # The search starts at index new_start - 1: 2 is 1 line after the first "x y z" (index 1)
    # and 4 before the second; 5 is 4 lines after the first and 1 before the second.
    assert apply(REPEATED, hunk(new_start, new_start, " x", "-y", "+Y", " z")) == expected


def test_after_the_hint_wins_a_tie_with_before_it() -> None:
    data = text("s", "k", "s", "k", "s")  # "s k s" at indexes 0 and 2; the search starts at 1
    assert apply(data, hunk(2, 2, " s", "-k", "+K", " s")) == text("s", "k", "s", "K", "s")


def test_hunk_with_old_start_1_must_match_at_the_start() -> None:
    data = text("intro", "x", "y", "z")
    with pytest.raises(HunkApplyError, match="at the start of the file"):
        apply(data, hunk(1, 1, " x", "-y", "+Y", " z"))
    # Without that rule the same hunk applies at its place.
    assert apply(data, hunk(2, 2, " x", "-y", "+Y", " z")) == text("intro", "x", "Y", "z")


def test_hunk_without_trailing_context_must_match_at_the_end() -> None:
    # "a b" at indexes 0 and 3; the search starts at 1, nearer 0, but the hunk ends the file.
    assert apply(text("a", "b", "c", "a", "b"), hunk(2, 2, " a", " b", "+B")) == text(
        "a", "b", "c", "a", "b", "B"
    )
    with pytest.raises(HunkApplyError, match="at the end of the file"):
        apply(text("a", "b", "c"), hunk(2, 2, " a", " b", "+B"))


def test_hunk_without_context_is_placed_by_its_line_numbers() -> None:
    data = text("a", "b", "c", "a", "b", "c")
    # git diff -U0: "@@ -4,0 +5 @@" inserts after old line 4.
    assert apply(data, hunk(4, 5, "+X")) == text("a", "b", "c", "a", "X", "b", "c")
    # "@@ -0,0 +1 @@" inserts at the top; a removal goes to the nearest match.
    assert apply(data, hunk(0, 1, "+T")) == text("T", "a", "b", "c", "a", "b", "c")
    assert apply(data, hunk(5, 4, "-b")) == text("a", "b", "c", "a", "c")


def test_later_hunks_are_searched_in_the_result_of_earlier_ones() -> None:
    data = text("a", "b", "c", "d", "e", "f", "g", "h")
    first = hunk(1, 1, " a", "+a2", "+a3", " b", " c")
    second = hunk(6, 8, " f", "-g", "+G", " h")
    assert apply(data, first, second) == text("a", "a2", "a3", "b", "c", "d", "e", "f", "G", "h")


def test_a_hunk_may_not_match_lines_an_earlier_hunk_wrote() -> None:
    data = text("a", "b", "c", "d")
    first = hunk(1, 1, " a", "-b", "+B", " c")
    overlapping = hunk(2, 2, " B", "-c", "+C", " d")
    with pytest.raises(HunkApplyError, match="hunk 2"):
        apply(data, first, overlapping)


def test_each_level_searches_the_whole_file_before_the_next() -> None:
    data = text("x  ", "y", "1", "2", "3", "4", "5", "x", "y", "6")
    # Near the hint only a whitespace-different "x" is there; an exact match is further away.
    new, levels = apply_hunks(data, [hunk(2, 2, "-x", "+X", " y")], path="f")
    assert levels == [MatchLevel.EXACT]
    assert new == text("x  ", "y", "1", "2", "3", "4", "5", "X", "y", "6")
    # Only the fuzzy one is followed by "1": the next level finds it.
    new, levels = apply_hunks(data, [hunk(2, 2, "-x", "+X", " y", " 1")], path="f")
    assert levels == [MatchLevel.RSTRIP]
    assert new == text("X", "y", "1", "2", "3", "4", "5", "x", "y", "6")


def test_whitespace_only_context_difference_matches_below_exact() -> None:
    data = text("def f():", "    return 1   ", "", "x")
    new, levels = apply_hunks(
        data, [hunk(1, 1, " def f():", "-    return 1", "+    return 2", " ")], path="f"
    )
    assert levels == [MatchLevel.RSTRIP]
    assert new == text("def f():", "    return 2", "", "x")


# ---------------------------------------------------------------- the final newline


def test_no_newline_marker_pins_the_hunk_to_the_end() -> None:
    data = text("v", "w", "v", final_newline=False)
    # "-v \ No newline" matches only the last line, never the first "v\n".
    assert apply(data, hunk(1, 1, "-v", "+V", old_eof=True, new_eof=True)) == text(
        "v", "w", "V", final_newline=False
    )


def test_exact_level_compares_the_final_newline_state() -> None:
    with_newline = text("a", "b")
    # The hunk says the old last line has no newline; the file has one: not an exact match.
    new, levels = apply_hunks(with_newline, [hunk(1, 1, " a", "-b", "+B", old_eof=True)], path="f")
    assert levels == [MatchLevel.RSTRIP]
    assert new == text("a", "B")


@pytest.mark.parametrize(
    ("data", "h", "expected"),
    [
        (
            text("a", "b", final_newline=False),
            hunk(1, 1, " a", "-b", "+b", old_eof=True),
            text("a", "b"),
        ),
        (
            text("a", "b"),
            hunk(1, 1, " a", "-b", "+b", new_eof=True),
            text("a", "b", final_newline=False),
        ),
        (
            text("a", "b", final_newline=False),
            hunk(1, 1, " a", " b", "+c", old_eof=True),
            text("a", "b", "c"),
        ),
        (text("a", "b", final_newline=False), hunk(1, 1, " a", "-b", old_eof=True), text("a")),
    ],
    ids=["adds-newline", "removes-newline", "appends-after-last", "drops-last"],
)
def test_the_new_last_line_ends_as_the_hunk_says(data: bytes, h: Hunk, expected: bytes) -> None:
    assert apply(data, h) == expected


def test_crlf_file_keeps_its_line_endings() -> None:
    data = b"one\r\ntwo\r\nthree\r\n"
    assert apply(data, hunk(1, 1, " one", "-two", "+TWO", "+2.5", " three")) == (
        b"one\r\nTWO\r\n2.5\r\nthree\r\n"
    )


def test_error_names_the_hunk_its_numbers_and_its_first_line() -> None:
    with pytest.raises(HunkApplyError) as info:
        apply(text("a", "b", "c", "d"), hunk(2, 2, " x", "-b", "+B", " c"))
    err = info.value
    assert err.message == "f: hunk 1 (@@ -2,3 @@): expected lines not found (first: 'x')"
    assert err.details["expected"] == ["x", "b", "c"]


# ---------------------------------------------------------------- planning


def test_plan_sets_modes(tmp_path: Path) -> None:
    (tmp_path / "s.sh").write_bytes(b"echo\n")
    (tmp_path / "x.sh").write_bytes(b"x\n")
    (tmp_path / "x.sh").chmod(0o755)
    tree_plan = plan(
        Patch(
            operations=(
                UpdateFile(path="s.sh", mode="100755"),
                UpdateFile(path="x.sh", mode="100644"),
                AddFile(path="new.sh", content="#!/bin/sh\n", mode="100755"),
            )
        ),
        DirReader(tmp_path),
    )
    assert [(c.path, c.mode, c.content) for c in tree_plan.changes] == [
        ("s.sh", MODE_EXEC, b"echo\n"),
        ("x.sh", MODE_FILE, b"x\n"),
        ("new.sh", MODE_EXEC, b"#!/bin/sh\n"),
    ]


def test_plan_copies_from_the_base_while_the_source_changes(tmp_path: Path) -> None:
    (tmp_path / "t.cfg").write_bytes(b"a = 1\nb = 2\n")
    (tmp_path / "t.cfg").chmod(0o755)
    tree_plan = plan(
        parse_unified(
            "diff --git a/t.cfg b/p.cfg\ncopy from t.cfg\ncopy to p.cfg\n--- a/t.cfg\n+++ b/p.cfg\n"
            "@@ -1,2 +1,2 @@\n a = 1\n-b = 2\n+b = 3\n"
            "diff --git a/t.cfg b/t.cfg\n--- a/t.cfg\n+++ b/t.cfg\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 0\n"
            " b = 2\n"
        ),
        DirReader(tmp_path),
    )
    copy, update = tree_plan.changes
    assert (copy.path, copy.action, copy.from_path, copy.content, copy.mode) == (
        "p.cfg",
        "add",
        "t.cfg",
        b"a = 1\nb = 3\n",
        MODE_EXEC,
    )
    assert (update.path, update.action, update.content) == ("t.cfg", "update", b"a = 0\nb = 2\n")
    assert tree_plan.removed == ()
    assert tree_plan.summary_lines() == ["A p.cfg", "M t.cfg"]


def test_plan_refuses_copy_to_itself_and_two_writers_of_a_copy_destination(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"a\n")
    with pytest.raises(PlanError, match="operation 1 copies a to itself"):
        plan(Patch(operations=(CopyFile(path="a", copy_to="a"),)), DirReader(tmp_path))
    with pytest.raises(PlanError, match="b is named by operations 1 and 2"):
        plan(
            Patch(operations=(CopyFile(path="a", copy_to="b"), AddFile(path="b", content=""))),
            DirReader(tmp_path),
        )


def test_plan_refuses_copying_a_symlink_or_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "real").write_bytes(b"r\n")
    (tmp_path / "link").symlink_to("real")
    with pytest.raises(UnsafePathError, match="cannot copy link: it is a symlink"):
        plan(Patch(operations=(CopyFile(path="link", copy_to="c"),)), DirReader(tmp_path))
    with pytest.raises(PlanError, match="cannot copy nope: no such file"):
        plan(Patch(operations=(CopyFile(path="nope", copy_to="c"),)), DirReader(tmp_path))


def test_plan_checks_a_unified_deletion_against_the_file(tmp_path: Path) -> None:
    (tmp_path / "d").write_bytes(b"1\n2\n")
    deletion = parse_unified("--- a/d\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-1\n-2\n")
    assert plan(deletion, DirReader(tmp_path)).removed == ("d",)
    (tmp_path / "d").write_bytes(b"1\n2\n3\n")
    with pytest.raises(PlanError, match="cannot delete d: it has lines the diff does not show"):
        plan(deletion, DirReader(tmp_path))
    (tmp_path / "d").write_bytes(b"0\n2\n")
    with pytest.raises(HunkApplyError):
        plan(deletion, DirReader(tmp_path))
    # A Codex deletion (no lines shown) deletes whatever is there.
    assert plan(Patch(operations=(DeleteFile(path="d"),)), DirReader(tmp_path)).removed == ("d",)


def test_plan_of_an_empty_file_deletion(tmp_path: Path) -> None:
    (tmp_path / "e").write_bytes(b"")
    deletion = parse_unified(
        "diff --git a/e b/e\ndeleted file mode 100644\nindex e69de29..0000000\n"
    )
    assert plan(deletion, DirReader(tmp_path)).removed == ("e",)
    (tmp_path / "e").write_bytes(b"not empty\n")
    with pytest.raises(PlanError, match="cannot delete e"):
        plan(deletion, DirReader(tmp_path))
