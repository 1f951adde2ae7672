"""How SEARCH/REPLACE blocks apply (pure): found exactly once in the whole file as the blocks
before left it, on the matching ladder; byte-exact line endings; the repair data of a miss."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from applyonce.patch import HunkApplyError, MatchLevel, UpdateFile, apply_hunks, parse
from applyonce.patch.match import AmbiguousContextError, BinaryFileError
from applyonce.patch.search import interned


def blocks(*pairs: tuple[str, str]) -> str:
    out = ["f.py"]
    for search, replace in pairs:
        out += ["<<<<<<< SEARCH", *search.splitlines(), "=======", *replace.splitlines()]
        out += [">>>>>>> REPLACE"]
    return "\n".join(out) + "\n"


def run(data: bytes, *pairs: tuple[str, str]) -> tuple[bytes, list[MatchLevel]]:
    (op,) = parse(blocks(*pairs)).operations
    assert isinstance(op, UpdateFile)
    return apply_hunks(data, op.hunks, path="f.py")


def test_a_block_replaces_its_search_lines() -> None:
    data = b"a\nb\nc\n"
    assert run(data, ("b", "B\nB2")) == (b"a\nB\nB2\nc\n", [MatchLevel.EXACT])


def test_blocks_apply_in_order_each_to_the_result_of_the_one_before() -> None:
    # The second block finds a line only the first wrote, and may come before it in the file.
    data = b"one\ntwo\nthree\n"
    assert run(data, ("three", "3\nnew"), ("new", "NEW"), ("one", "1"))[0] == b"1\ntwo\n3\nNEW\n"


def test_search_found_twice_is_refused_naming_both_places() -> None:
    data = b"x = 1\ny = 2\nx = 1\n"
    with pytest.raises(AmbiguousContextError) as info:
        run(data, ("x = 1", "x = 3"))
    message = str(info.value)
    assert message == (
        "f.py: block 1: the SEARCH lines match at 2 places (lines 1, 3; first SEARCH line: 'x = 1')"
    )
    assert info.value.kind == "ambiguous-context"
    assert info.value.details["candidates"] == [1, 3]
    assert "SEARCH" in (info.value.hint or "")


def test_found_once_in_the_whole_file_not_only_after_the_block_before() -> None:
    # A Codex hunk would be searched after the first hunk only, and find one 'x = 1'.
    data = b"x = 1\nmid\nx = 1\n"
    with pytest.raises(AmbiguousContextError):
        run(data, ("mid", "MID"), ("x = 1", "x = 2"))


def test_search_not_found_is_a_hunk_mismatch_with_the_nearest_lines() -> None:
    data = b"def f():\n    return 1\n\n\ndef g():\n    return 2\n"
    with pytest.raises(HunkApplyError) as info:
        run(data, ("def g():\n    return 3", "def g():\n    return 4"))
    error = info.value
    assert error.kind == "hunk-mismatch"
    assert str(error) == "f.py: block 1: the SEARCH lines are not in the file (first: 'def g():')"
    assert error.details["expected"] == ["def g():", "    return 3"]
    assert error.details["region_start"] == 3
    assert error.details["region"][2:] == ["def g():", "    return 2"]
    assert error.details["region_equal"] == 1
    assert error.details["patch_line"] == 2


def test_a_block_already_applied_says_so() -> None:
    data = b"a\nB\nc\n"
    with pytest.raises(HunkApplyError, match=r"already at f\.py:2 — was this patch applied"):
        run(data, ("b", "B"))


def test_the_ladder_finds_lines_with_other_whitespace_and_keeps_kept_lines_bytes() -> None:
    data = b"def f():  \n\treturn 1\n"
    new, levels = run(data, ("def f():\n    return 1", "def f():\n    return 2"))
    assert levels == [MatchLevel.STRIP]
    # The unchanged first line keeps its trailing spaces; the changed one is the block's.
    assert new == b"def f():  \n    return 2\n"


def test_a_crlf_file_stays_crlf() -> None:
    data = b"a\r\nb\r\nc\r\n"
    assert run(data, ("b", "B\nB2"))[0] == b"a\r\nB\r\nB2\r\nc\r\n"


def test_mixed_endings_keep_each_kept_line_s_own() -> None:
    data = b"a\nb\r\nc\n"
    assert run(data, ("a\nb\nc", "a\nb\nC"))[0] == b"a\nb\r\nC\n"


def test_a_missing_final_newline_is_kept() -> None:
    assert run(b"a\nb", ("b", "B\nB2"))[0] == b"a\nB\nB2"
    assert run(b"a\nb", ("a\nb", "A\nb"))[0] == b"A\nb"
    assert run(b"a\nb", ("b", ""))[0] == b"a"
    assert run(b"a\nb\n", ("b", "B"))[0] == b"a\nB\n"


def test_a_byte_order_mark_is_kept() -> None:
    assert run(b"\xef\xbb\xbfa\nb\n", ("a", "A"))[0] == b"\xef\xbb\xbfA\nb\n"


def test_binary_and_non_utf8_files_are_refused() -> None:
    with pytest.raises(BinaryFileError):
        run(b"a\x00\nb\n", ("b", "B"))
    with pytest.raises(BinaryFileError):
        run(b"a\xff\nb\n", ("b", "B"))


def test_a_block_that_removes_lines() -> None:
    assert run(b"a\nb\nc\n", ("b", ""))[0] == b"a\nc\n"


def test_each_line_is_hashed_once_however_many_blocks() -> None:
    # Blocks search the file as the blocks before left it: its line ids are kept up to date as
    # blocks replace lines, never made again per block (that would be blocks x file).
    n, k = 3000, 300
    data = "".join(f"line {i}\n" for i in range(n)).encode()
    pairs = [(f"line {i * 10}", f"LINE {i * 10}\nmore {i}") for i in range(k)]
    before = interned()
    new, levels = run(data, *pairs)
    assert levels == [MatchLevel.EXACT] * k
    assert interned() - before == n + 2 * k  # the file once, then each block's new lines
    assert new.count(b"\nmore ") == k


PROPERTY = settings(derandomize=True, max_examples=150, deadline=None)


@PROPERTY
@given(
    count=st.integers(1, 30),
    data=st.data(),
    newline=st.sampled_from(["\n", "\r\n"]),
    final_newline=st.booleans(),
)
def test_a_block_writes_what_the_codex_hunk_of_its_lines_writes(
    count: int, data: st.DataObject, newline: str, final_newline: bool
) -> None:
    """Where a block's SEARCH lines are at one place, it changes the file as the Codex hunk that
    removes them and adds its REPLACE lines does (the same endings, the same bytes), and its
    REPLACE lines are there afterwards."""
    lines = [f"line {i}" for i in range(count)]
    # A file without a final newline: Codex gives a changed last line an ending, a block keeps
    # the file's state, so the window stops before the last line there.
    last = count if final_newline else count - 1
    start = data.draw(st.integers(0, max(last - 1, 0)))
    stop = data.draw(st.integers(min(start + 1, last), last))
    if stop <= start:
        return
    replace = data.draw(st.lists(st.sampled_from(["x", "", "  y", "line 0"]), max_size=4))
    text = newline.join(lines) + (newline if final_newline else "")
    search = lines[start:stop]
    block = "f.py\n<<<<<<< SEARCH\n" + "".join(s + "\n" for s in search) + "=======\n"
    block += "".join(r + "\n" for r in replace) + ">>>>>>> REPLACE\n"
    codex = "*** Begin Patch\n*** Update File: f.py\n@@\n"
    codex += "".join(f"-{s}\n" for s in search) + "".join(f"+{r}\n" for r in replace)
    codex += "*** End Patch\n"
    (sr_op,) = parse(block).operations
    (codex_op,) = parse(codex).operations
    assert isinstance(sr_op, UpdateFile) and isinstance(codex_op, UpdateFile)
    got = apply_hunks(text.encode(), sr_op.hunks, path="f.py")[0]
    assert got == apply_hunks(text.encode(), codex_op.hunks, path="f.py")[0]
    want = lines[:start] + replace + lines[stop:]
    assert got.decode() == newline.join(want) + (newline if final_newline and want else "")
