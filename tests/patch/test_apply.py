"""The hunk applier: matching ladder, placement, line endings, BOM, final newline, errors."""

from __future__ import annotations

import pytest

from applyonce.patch import BinaryFileError, Hunk, HunkApplyError, HunkLine, MatchLevel, apply_hunks
from applyonce.patch.match import AmbiguousContextError


def hunk(
    *spec: str, anchors: tuple[str, ...] = (), eof: bool = False, line: int | None = None
) -> Hunk:
    """``hunk(" ctx", "-old", "+new")``."""
    return Hunk(
        anchors=anchors,
        lines=tuple(HunkLine(kind=s[0], text=s[1:]) for s in spec),
        end_of_file=eof,
        source_line=line,
    )


def apply(data: bytes, *hunks: Hunk) -> bytes:
    return apply_hunks(data, hunks, path="f.txt")[0]


def levels(data: bytes, *hunks: Hunk) -> list[MatchLevel]:
    return apply_hunks(data, hunks, path="f.txt")[1]


# ---------------------------------------------------------------- matching ladder


@pytest.mark.parametrize(
    ("data", "level"),
    [
        (b"a\n  x = 1\nb\n", MatchLevel.EXACT),
        (b"a\n  x = 1 \t \nb\n", MatchLevel.RSTRIP),
        (b"a\n\tx = 1\nb\n", MatchLevel.STRIP),
        (b"a\n  x\xc2\xa0=\xe2\x80\x891\nb\n", MatchLevel.UNICODE),  # NBSP, thin space
    ],
)
def test_match_level_of_a_removed_line(data: bytes, level: MatchLevel) -> None:
    new, found = apply_hunks(data, [hunk("-  x = 1", "+  x = 2")], path="f.txt")
    assert found == [level]
    assert new == b"a\n  x = 2\nb\n"


@pytest.mark.parametrize(
    ("file_line", "patch_line"),
    [
        ("\u201cquoted\u201d", '"quoted"'),
        ("\u2018single\u2019", "'single'"),
        ("a \u2013 b \u2014 c \u2212 d", "a - b - c - d"),
        ("wait\u2026", "wait..."),
        ('"ascii in file"', "\u201cascii in file\u201d"),  # folding works both ways
    ],
)
def test_unicode_level_folds_typographic_punctuation(file_line: str, patch_line: str) -> None:
    data = f"before\n{file_line}\nafter\n".encode()
    new, found = apply_hunks(data, [hunk(" " + patch_line, "-after", "+AFTER")], path="f.txt")
    assert found == [MatchLevel.UNICODE]
    # the context line keeps the file's characters, not the patch's ASCII
    assert new == f"before\n{file_line}\nAFTER\n".encode()


def test_levels_are_recorded_per_hunk() -> None:
    data = b"one\ntwo  \n  three\n\xe2\x80\x9cfour\xe2\x80\x9d\n"
    assert levels(
        data,
        hunk("-one", "+1"),
        hunk("-two", "+2"),
        hunk("-three", "+3"),
        hunk('-"four"', "+4"),
    ) == [MatchLevel.EXACT, MatchLevel.RSTRIP, MatchLevel.STRIP, MatchLevel.UNICODE]


def test_exact_match_later_wins_over_fuzzy_match_earlier() -> None:
    new, found = apply_hunks(b"k = 1  \nmid\nk = 1\n", [hunk("-k = 1", "+k = 2")], path="f")
    assert found == [MatchLevel.EXACT]
    assert new == b"k = 1  \nmid\nk = 2\n"


def test_rstrip_does_not_ignore_leading_whitespace() -> None:
    # "  x" vs "x": only STRIP finds it, so the level says so.
    assert levels(b"  x\n", hunk("-x", "+y")) == [MatchLevel.STRIP]


def test_match_level_labels() -> None:
    assert [level.label for level in MatchLevel] == ["exact", "rstrip", "strip", "unicode"]


def test_context_lines_are_never_rewritten_at_fuzzy_levels() -> None:
    data = b"\tdef f():  \r\n\t\treturn \xe2\x80\x9cx\xe2\x80\x9d\t\r\n\tpass\r\n"
    new, found = apply_hunks(
        data, [hunk(" def f():", ' return "x"', "-pass", "+    done")], path="f.txt"
    )
    assert found == [MatchLevel.UNICODE]
    assert new == b"\tdef f():  \r\n\t\treturn \xe2\x80\x9cx\xe2\x80\x9d\t\r\n    done\r\n"


def test_added_lines_are_the_patch_text_verbatim() -> None:
    assert apply(b"a\n", hunk("-a", "+  \u201cb\u201d  ")) == "  \u201cb\u201d  \n".encode()


# ---------------------------------------------------------------- line endings


def test_crlf_file_stays_crlf() -> None:
    assert apply(b"a\r\nb\r\nc\r\n", hunk(" a", "-b", "+B", "+B2")) == b"a\r\nB\r\nB2\r\nc\r\n"


def test_lone_cr_file_stays_cr() -> None:
    assert apply(b"a\rb\rc\r", hunk(" a", "-b", "+B")) == b"a\rB\rc\r"


def test_mixed_endings_stay_mixed_and_new_lines_take_the_dominant_one() -> None:
    data = b"l1\r\nl2\nl3\r\nl4\nl5\r\n"
    assert apply(data, hunk(" l2", "+new", " l3")) == b"l1\r\nl2\nnew\r\nl3\r\nl4\nl5\r\n"
    data = b"l1\nl2\r\nl3\nl4\n"
    assert apply(data, hunk(" l2", "+new", " l3")) == b"l1\nl2\r\nnew\nl3\nl4\n"


def test_dominant_ending_tie_goes_to_the_first_seen() -> None:
    assert apply(b"a\r\nb\nc", hunk(" c", "+d")) == b"a\r\nb\nc\r\nd\r\n"
    assert apply(b"a\nb\r\nc", hunk(" c", "+d")) == b"a\nb\r\nc\nd\n"


def test_replaced_line_takes_the_dominant_ending_not_its_old_one() -> None:
    assert apply(b"a\r\nb\nc\r\n", hunk("-b", "+B")) == b"a\r\nB\r\nc\r\n"


def test_file_without_any_line_ending_gets_lf() -> None:
    assert apply(b"only", hunk(" only", "+next")) == b"only\nnext\n"


# ---------------------------------------------------------------- final newline


def test_missing_final_newline_is_kept_when_last_line_untouched() -> None:
    assert apply(b"a\nb\nc", hunk("-a", "+A", " b")) == b"A\nb\nc"
    assert apply(b"a\r\nb\r\nc", hunk(" a", "+x", " b", " c")) == b"a\r\nx\r\nb\r\nc"


def test_final_newline_is_kept_when_last_line_untouched() -> None:
    assert apply(b"a\nb\n", hunk("-a", "+A")) == b"A\nb\n"


def test_changing_the_last_line_gives_it_the_usual_ending() -> None:
    assert apply(b"a\r\nb", hunk(" a", "-b", "+B")) == b"a\r\nB\r\n"


def test_adding_after_a_last_line_without_newline_ends_it() -> None:
    assert apply(b"a\nb", hunk(" b", "+c")) == b"a\nb\nc\n"
    assert apply(b"a\nb", hunk("+c")) == b"a\nb\nc\n"


def test_deleting_the_last_line() -> None:
    assert apply(b"a\nb\nc", hunk(" b", "-c")) == b"a\nb\n"
    assert apply(b"a\n", hunk("-a")) == b""


# ---------------------------------------------------------------- BOM


def test_bom_is_kept_and_ignored_for_matching() -> None:
    data = b"\xef\xbb\xbffirst\nsecond\n"
    new, found = apply_hunks(data, [hunk("-first", "+FIRST")], path="f")
    assert found == [MatchLevel.EXACT]
    assert new == b"\xef\xbb\xbfFIRST\nsecond\n"


def test_bom_is_kept_when_the_first_line_is_context() -> None:
    assert apply(b"\xef\xbb\xbfa\r\nb\r\n", hunk(" a", "-b", "+c")) == b"\xef\xbb\xbfa\r\nc\r\n"


def test_no_bom_is_added() -> None:
    assert not apply(b"a\n", hunk("-a", "+b")).startswith(b"\xef\xbb\xbf")


# ---------------------------------------------------------------- placement: order, anchors, EOF


def test_hunks_are_searched_in_order() -> None:
    # "-x" alone matches twice in the file, but only once after the first hunk.
    data = b"x\ny\nx\n"
    assert apply(data, hunk("-x", "+1", " y"), hunk("-x", "+2")) == b"1\ny\n2\n"


def test_an_ambiguous_hunk_is_refused_naming_every_candidate() -> None:
    with pytest.raises(AmbiguousContextError) as info:
        apply_hunks(b"a\nx = 1\nb\nx = 1\n", [hunk("-x = 1", "+x = 2", line=4)], path="f")
    err = info.value
    assert err.kind == "ambiguous-context"
    assert err.details["candidates"] == [2, 4]
    assert "lines 2, 4" in err.message
    assert "'@@" in err.hint and "context" in err.hint


def test_an_anchored_ambiguous_hunk_is_not_told_to_add_the_anchor_it_has() -> None:
    # The anchor opens no block, so both places stay after it: the hint must not ask for an
    # anchor the hunk already has, but for more context or a more specific one.
    data = b"class A:\n    pass\nx = 1\nb = 0\nx = 1\n"
    with pytest.raises(AmbiguousContextError) as info:
        apply(data, hunk("-x = 1", "+x = 2", anchors=("class A:",)))
    hint = info.value.hint
    assert "add an '@@" not in hint and "naming the def or class" not in hint
    assert "'class A:'" in hint and "more specific" in hint


def test_ambiguity_is_judged_at_the_first_level_that_matches() -> None:
    # Exact once, stripped twice: the exact match is unique, so it is not a guess.
    data = b"  x\nx\n  x \n"
    assert apply(data, hunk("-x", "+y")) == b"  x\ny\n  x \n"
    with pytest.raises(AmbiguousContextError):
        apply(b"  x\n\tx\n", hunk("-x", "+y"))


def test_ambiguity_is_judged_inside_the_region_the_anchor_leaves() -> None:
    data = b"x = 1\n[b]\nx = 1\n"
    assert apply(data, hunk("-x = 1", "+x = 2", anchors=("[b]",))) == b"x = 1\n[b]\nx = 2\n"


def test_context_only_and_end_of_file_hunks_are_never_ambiguous() -> None:
    assert apply(b"x\nx\n", hunk("-x", "+y", eof=True)) == b"x\ny\n"
    # A context-only hunk changes nothing wherever it matches; the next hunk follows it.
    assert apply(b"x\na\nx\na\n", hunk(" x"), hunk(" a", "-x", "+y")) == b"x\na\ny\na\n"


def test_a_hunk_is_not_searched_before_the_previous_one() -> None:
    with pytest.raises(HunkApplyError) as info:
        apply(b"a\nb\nc\n", hunk("-c", "+C"), hunk("-a", "+A"))
    assert info.value.details["hunk"] == 2


def test_anchor_narrows_the_search() -> None:
    data = b"[one]\nv = 0\n[two]\nv = 0\n"
    assert (
        apply(data, hunk("-v = 0", "+v = 2", anchors=("[two]",))) == b"[one]\nv = 0\n[two]\nv = 2\n"
    )


def test_anchor_matches_through_the_ladder() -> None:
    data = b"class A:\n    def f(self):\n        pass\n"
    new = apply(data, hunk("-pass", "+return 1", anchors=("def f(self):",)))
    assert new == b"class A:\n    def f(self):\nreturn 1\n"


def test_nested_anchors_pick_the_method_of_the_right_class() -> None:
    data = (
        b"class B:\n    def f(self):\n        return 1\n"
        b"class A:\n    def g(self):\n        return 1\n    def f(self):\n        return 1\n"
    )
    new = apply(
        data, hunk("-        return 1", "+        return 42", anchors=("class A:", "def f(self):"))
    )
    assert new == (
        b"class B:\n    def f(self):\n        return 1\n"
        b"class A:\n    def g(self):\n        return 1\n    def f(self):\n        return 42\n"
    )


def test_anchors_apply_in_turn() -> None:
    # "def f" exists before "class A" too; the second anchor is searched after the first.
    data = b"def f():\n  x\nclass A:\ndef f():\n  x\n"
    new = apply(data, hunk("-  x", "+  y", anchors=("class A:", "def f():")))
    assert new == b"def f():\n  x\nclass A:\ndef f():\n  y\n"


def test_anchor_not_found_error() -> None:
    with pytest.raises(HunkApplyError) as info:
        apply_hunks(
            b"a\nb\n", [hunk("-a", "+b"), hunk("-b", anchors=("zzz",), line=7)], path="src/x.py"
        )
    err = info.value
    assert err.details == {"path": "src/x.py", "hunk": 2, "patch_line": 7, "expected": ["zzz"]}
    assert "anchor line 'zzz' not found" in err.message
    assert err.kind == "hunk-mismatch"
    assert "\n" not in err.one_line()


def test_anchor_before_the_cursor_is_not_found() -> None:
    with pytest.raises(HunkApplyError, match="anchor"):
        apply(b"[a]\nx\n[b]\ny\n", hunk("-y", "+Y"), hunk("-x", "+X", anchors=("[a]",)))


def test_pure_addition_with_anchor_goes_right_after_it() -> None:
    data = b"[a]\nx = 1\n[b]\ny = 1\n"
    assert apply(data, hunk("+z = 1", anchors=("[a]",))) == b"[a]\nz = 1\nx = 1\n[b]\ny = 1\n"


def test_pure_addition_without_anchor_is_appended() -> None:
    assert apply(b"a\nb\n", hunk("+c", "+d")) == b"a\nb\nc\nd\n"


def test_pure_addition_with_anchor_and_end_of_file_is_appended() -> None:
    assert apply(b"[a]\nx\n[b]\n", hunk("+y", anchors=("[a]",), eof=True)) == b"[a]\nx\n[b]\ny\n"


def test_pure_addition_to_an_empty_file() -> None:
    new, found = apply_hunks(b"", [hunk("+first")], path="f")
    assert (new, found) == (b"first\n", [MatchLevel.EXACT])


def test_an_addition_appended_at_the_end_leaves_the_search_position_alone() -> None:
    # As Codex: the hunks after it are still searched from where the previous one ended (and the
    # edits are written in file order, so nothing is duplicated).
    assert apply(b"a\nb\nc\n", hunk("+z"), hunk("-a", "+A")) == b"A\nb\nc\nz\n"
    assert apply(b"a\nb\nc\n", hunk("-a", "+A"), hunk("+z")) == b"A\nb\nc\nz\n"
    assert apply(b"a\nb\n", hunk("+y", eof=True), hunk("+z"), hunk("-b", "+B")) == b"a\nB\ny\nz\n"


def test_runs_at_one_place_keep_the_patch_order() -> None:
    # Hunk 1 appends P at the end; hunk 2 adds Q after the last line: P comes first, as in Codex.
    assert apply(b"x\ny\n", hunk("+P"), hunk(" y", "+Q")) == b"x\ny\nP\nQ\n"
    assert apply(b"x\ny\n", hunk("+P", eof=True), hunk(" y", "+Q")) == b"x\ny\nP\nQ\n"


def test_end_of_file_hunk_matches_the_last_lines() -> None:
    data = b"end\nmiddle\nend\n"
    assert apply(data, hunk("-end", "+END", eof=True)) == b"end\nmiddle\nEND\n"


def test_end_of_file_hunk_not_at_end_is_refused() -> None:
    with pytest.raises(HunkApplyError) as info:
        apply_hunks(b"a\nb\nc\n", [hunk("-b", "+B", eof=True, line=3)], path="f")
    assert "at the end of the file" in info.value.message
    assert info.value.details == {
        "path": "f",
        "hunk": 1,
        "patch_line": 3,
        "expected": ["b"],
        # The repair data (``patch/repair.py``): the nearest region of the file.
        "region_start": 1,
        "region": ["a", "b", "c"],
        "region_equal": 1,
    }


def test_end_of_file_hunk_may_not_overlap_the_previous_hunk() -> None:
    # Regression: the EOF hunk ignored where the previous hunk ended, so " b" (already replaced by
    # hunk 1) was matched again and the output kept both the old and the new line.
    with pytest.raises(HunkApplyError) as info:
        apply(b"a\nb\nc\n", hunk("-b", "+B"), hunk(" b", "-c", "+C", eof=True))
    assert info.value.details["hunk"] == 2
    assert apply(b"a\nb\nc\n", hunk("-b", "+B"), hunk("-c", "+C", eof=True)) == b"a\nB\nC\n"


def test_end_of_file_uses_the_ladder() -> None:
    new, found = apply_hunks(b"a\nlast  ", [hunk("-last", "+LAST", eof=True)], path="f")
    assert (new, found) == (b"a\nLAST\n", [MatchLevel.RSTRIP])


def test_trailing_blank_context_missing_from_the_file_is_dropped() -> None:
    assert apply(
        b"def f():\n    return 1\n", hunk(" def f():", "-    return 1", "+    return 2", " ")
    ) == (b"def f():\n    return 2\n")
    # Only one, as Codex retries: two blank lines the file does not have are a mismatch.
    with pytest.raises(HunkApplyError):
        apply(b"a\nb\n", hunk(" a", "-b", "+B", " ", " "))


def test_trailing_removed_empty_line_missing_from_the_file_is_dropped() -> None:
    assert apply(b"a\nb\nc\n", hunk(" a", "-b", "-")) == b"a\nc\n"
    assert apply(b"a\nb\n\nc\n", hunk(" a", "-b", "-")) == b"a\nc\n"  # when there, removed


def test_trailing_blank_context_is_part_of_the_search() -> None:
    # The blank context line decides which "x" is meant: the one followed by a blank line.
    assert apply(b"x\ny\nx\n\n", hunk("-x", "+X", " ")) == b"x\ny\nX\n\n"


def test_trailing_blank_context_is_kept_when_in_the_file() -> None:
    assert apply(b"a\n\nb\n", hunk("-a", "+A", " ")) == b"A\n\nb\n"


def test_an_end_of_file_addition_left_by_the_retry_goes_at_the_end() -> None:
    # "+four", a blank line, "*** End of File" on a file that does not end in a blank line.
    assert apply(b"one\ntwo\n", hunk("+four", " ", eof=True)) == b"one\ntwo\nfour\n"


def test_blank_context_with_added_lines_after_it() -> None:
    # Retried without the old side of the blank line; its new side stays, as in Codex.
    assert apply(b"a\n", hunk("-a", "+A", " ", "+tail")) == b"A\n\ntail\n"


# ---------------------------------------------------------------- errors


def test_hunk_not_found_error_fields() -> None:
    with pytest.raises(HunkApplyError) as info:
        apply_hunks(
            b"one\ntwo\n",
            [hunk("-one", "+1"), hunk(" two", "-three", "+3", line=12)],
            path="pkg/mod.py",
        )
    err = info.value
    assert err.details == {
        "path": "pkg/mod.py",
        "hunk": 2,
        "patch_line": 12,
        "expected": ["two", "three"],
        "region_start": 1,
        "region": ["one", "two"],
        "region_equal": 1,
    }
    assert err.message == "pkg/mod.py: hunk 2: expected lines not found (first: 'two')"
    assert "\n" not in err.one_line()
    assert err.to_dict()["expected"] == ["two", "three"]


def test_hunk_longer_than_the_file_is_not_found() -> None:
    with pytest.raises(HunkApplyError):
        apply(b"a\n", hunk(" a", "-b"))
    with pytest.raises(HunkApplyError):
        apply(b"", hunk("-a"))


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"text\x00more\n", "NUL"),
        (b"\x00", "NUL"),
        (b"caf\xe9\n", "not UTF-8"),
        (b"ok\n\xff\xfe\n", "not UTF-8"),
        (b"\xed\xa0\x80\n", "not UTF-8"),  # an encoded surrogate
    ],
)
def test_binary_and_non_utf8_files_are_refused(data: bytes, needle: str) -> None:
    with pytest.raises(BinaryFileError) as info:
        apply_hunks(data, [hunk("+x")], path="blob.bin")
    assert needle in info.value.message
    assert info.value.details == {"path": "blob.bin"}
    assert info.value.kind == "binary-file"


def test_utf16_file_is_refused() -> None:
    with pytest.raises(BinaryFileError):
        apply(b"\xff\xfea\x00\n\x00", hunk("+x"))
