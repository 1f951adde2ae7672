"""Where a Codex hunk goes: decided by everything the patch says (its ``@@`` anchors and the blocks
they open, then the order of the hunks), refused only when two places are still left, naming them
and the line that would decide; an addition's trailing empty lines weighed in both readings; and a
unified diff of a file with a NUL byte past git's binary window applied byte for byte."""

from __future__ import annotations

import pytest

from applyonce.patch import parse
from applyonce.patch.apply import apply_hunks
from applyonce.patch.match import AmbiguousContextError, BinaryFileError
from applyonce.patch.model import UpdateFile

TWO_CLASSES = b"class A:\n    def m(self):\n        return 1\n\nclass B:\n    def m(self):\n        return 1\n"


def _apply(data: bytes, body: str, path: str = "a.py") -> bytes:
    patch = parse(f"*** Begin Patch\n*** Update File: {path}\n{body}*** End Patch\n", "codex")
    op = patch.operations[0]
    assert isinstance(op, UpdateFile)
    return apply_hunks(data, op.hunks, path=path)[0]


def _refusal(data: bytes, body: str) -> AmbiguousContextError:
    with pytest.raises(AmbiguousContextError) as caught:
        _apply(data, body)
    return caught.value


def test_an_anchor_decides_between_two_methods_by_its_block() -> None:
    body = "@@ class A:\n     def m(self):\n-        return 1\n+        return 2\n"
    assert _apply(TWO_CLASSES, body) == TWO_CLASSES.replace(b"return 1", b"return 2", 1)


def test_nested_anchors_decide_by_their_nested_blocks() -> None:
    data = (
        b"class A:\n    def m(self):\n        x = 1\n    def n(self):\n        x = 1\n"
        b"class B:\n    def n(self):\n        x = 1\n"
    )
    body = "@@ class A:\n@@     def n(self):\n-        x = 1\n+        x = 2\n"
    assert _apply(data, body) == data.replace(b"x = 1\nclass", b"x = 2\nclass")


def test_an_anchor_whose_block_holds_the_context_twice_is_refused_naming_both() -> None:
    data = b"class A:\n    def m(self):\n        return 1\n    def n(self):\n        return 1\n"
    error = _refusal(data, "@@ class A:\n-        return 1\n+        return 2\n")
    assert error.kind == "ambiguous-context"
    assert error.details["candidates"] == [3, 5]
    line = error.one_line()
    assert "match at 2 places (lines 3, 5)" in line
    assert "the nearest line before them that differs: '    def m(self):' (line 2) vs" in line
    assert "add the line '    def m(self):' (line 2) as a context line before" in line
    assert "\n" not in line


def test_without_an_anchor_two_places_are_refused_naming_the_line_after_that_decides() -> None:
    data = b"x = 1\ny = 1\nx = 1\nz = 1\n"
    line = _refusal(data, "@@\n-x = 1\n+x = 2\n").one_line()
    assert "match at 2 places (lines 1, 3)" in line
    assert "the nearest line after them that differs: 'y = 1' (line 2) vs 'z = 1' (line 4)" in line


def test_the_order_of_the_hunks_decides_the_first_hunk() -> None:
    data = b"x = 1\nstep\nend\nx = 1\n"
    assert _apply(data, "@@\n-x = 1\n+x = 2\n@@\n step\n-end\n+END\n", "t.txt") == (
        b"x = 2\nstep\nEND\nx = 1\n"
    )


def test_hunks_that_fit_in_order_at_two_places_are_refused() -> None:
    data = b"x = 1\nstep\nx = 1\nstep\nend\n"
    line = _refusal(data, "@@\n-x = 1\n+x = 2\n@@\n step\n").one_line()
    assert "hunk 1: the expected lines match at 2 places (lines 1, 3)" in line


def test_an_addition_whose_empty_line_reads_two_ways_is_refused() -> None:
    data = b"a\n\nb\n"
    error = _refusal(data, "@@\n+c\n\n")
    assert error.kind == "ambiguous-context"
    assert (
        "the 1 empty line after the added lines read as a separator put them at the end of the "
        "file (line 4), read as empty context lines before line 2" in error.one_line()
    )


def test_an_addition_whose_empty_line_is_not_in_the_file_is_appended() -> None:
    assert _apply(b"a\nb\n", "@@\n+c\n\n") == b"a\nb\nc\n"


def test_an_addition_whose_two_readings_agree_is_applied() -> None:
    data = b"def f():\n\n    return 1\n"
    assert _apply(data, "@@ def f():\n+    x = 1\n\n") == b"def f():\n    x = 1\n\n    return 1\n"


def _unified(data: bytes, diff: str) -> bytes:
    patch = parse(diff, "unified")
    op = patch.operations[0]
    assert isinstance(op, UpdateFile)
    return apply_hunks(data, op.hunks, path="f.txt")[0]


LATE_NUL = b"".join(b"line %d\n" % i for i in range(1200)) + b"a\x00b\ntail\n"
LATE_DIFF = "--- a/f.txt\n+++ b/f.txt\n@@ -1200,2 +1200,2 @@\n a\x00b\n-tail\n+TAIL\n"


def test_a_unified_diff_of_a_file_with_a_nul_past_gits_window_applies_byte_for_byte() -> None:
    assert _unified(LATE_NUL, LATE_DIFF) == LATE_NUL.replace(b"tail\n", b"TAIL\n")


def test_a_file_with_a_nul_in_gits_window_is_still_binary() -> None:
    data = b"a\x00b\n" + LATE_NUL
    diff = "--- a/f.txt\n+++ b/f.txt\n@@ -1,1 +1,1 @@\n-a\x00b\n+ab\n"
    with pytest.raises(BinaryFileError, match="binary"):
        _unified(data, diff)


def test_a_long_def_anchor_opens_its_body_past_the_closing_bracket_line() -> None:
    data = (
        b"class A:\n    def f(\n        self,\n    ) -> None:\n        x = 1\n\n"
        b"class B:\n    def f(\n        self,\n    ) -> None:\n        x = 1\n"
    )
    body = "@@     def f(\n-        x = 1\n+        x = 2\n"
    assert _apply(data, body) == data.replace(b"x = 1", b"x = 2", 1)
