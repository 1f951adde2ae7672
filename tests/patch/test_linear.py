"""Locating a hunk is linear in the file plus the hunk, whatever the lines repeat.

The work is counted (``search.steps()``: line comparisons), not timed, so the bound holds on a
loaded machine. The searches must also find exactly what the simple quadratic search finds: the
same matches, in the same order, and for unified hunks the same nearest place (``_reference_*``
below are the searches this module replaced, kept as the specification).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from applyonce.patch import Hunk, HunkLine, MatchLevel, apply_hunks, parse, search, unified
from applyonce.patch import apply as apply_module
from applyonce.patch.apply import _Image, _search_rank
from applyonce.patch.match import _NORMALISERS, AmbiguousContextError, _matches, decode_text

N = 20_000
M = 2_000


def _repeated_file() -> bytes:
    # One line repeated, one other line in the middle: every place matches the hunk's first M - 1
    # lines, and only one matches the whole hunk. The simple search costs about N * M there.
    lines = ["    pass"] * (N // 2) + ["END"] + ["    pass"] * (N // 2 - 1)
    return ("\n".join(lines) + "\n").encode()


def _body() -> str:
    return "\n".join([" " + "    pass"] * (M - 1) + ["-END", "+DONE", " " + "    pass"]) + "\n"


def test_codex_hunk_search_is_linear_on_repeated_lines() -> None:
    text = "*** Begin Patch\n*** Update File: big.py\n@@\n" + _body() + "*** End Patch\n"
    hunks = parse(text).operations[0].hunks  # type: ignore[union-attr]
    before = search.steps()
    out, levels = apply_hunks(_repeated_file(), hunks, path="big.py")
    work = search.steps() - before
    assert b"    pass\nDONE\n    pass\n" in out and levels == [MatchLevel.EXACT]
    # Counted (the hunk was compared at least once), and linear: the simple search made about
    # N * M = 40,000,000 comparisons here.
    assert M <= work <= 4 * (N + M), work


def test_unified_hunk_search_is_linear_on_repeated_lines() -> None:
    # The line numbers point at line 2, far from the one place the hunk fits: the outward search
    # passes every place in between.
    text = f"--- a/big.py\n+++ b/big.py\n@@ -2,{M + 1} +2,{M + 1} @@\n" + _body()
    hunks = parse(text).operations[0].hunks  # type: ignore[union-attr]
    before = search.steps()
    out, levels = apply_hunks(_repeated_file(), hunks, path="big.py")
    work = search.steps() - before
    assert b"    pass\nDONE\n    pass\n" in out and levels == [MatchLevel.EXACT]
    assert M <= work <= 8 * (N + M), work


def test_an_ambiguous_hunk_over_repeated_lines_is_refused_in_linear_work() -> None:
    data = ("x\n" * N).encode()
    text = "*** Begin Patch\n*** Update File: f\n@@\n" + " x\n" * M + "-x\n+y\n*** End Patch\n"
    hunks = parse(text).operations[0].hunks  # type: ignore[union-attr]
    before = search.steps()
    try:
        apply_hunks(data, hunks, path="f")
    except AmbiguousContextError as exc:
        assert exc.details["candidates"][:3] == [1, 2, 3]
        assert len(exc.details["candidates"]) == N - M
    else:
        raise AssertionError("not refused")
    assert M <= search.steps() - before <= 4 * (N + M)


# ---------------------------------------------------------------- the same answers as before


def _reference_matches(keys: list[str], want: list[str], start: int) -> list[int]:
    return [i for i in range(start, len(keys) - len(want) + 1) if keys[i : i + len(want)] == want]


lines_of = st.lists(st.sampled_from(["a", "b", " a", "a ", "b\u00a0"]), max_size=30)


@given(lines_of, lines_of, st.integers(0, 30))
def test_codex_matches_are_those_of_the_simple_search(
    file: list[str], old: list[str], start: int
) -> None:
    text = decode_text(("\n".join(file) + "\n").encode() if file else b"", path="f")
    for level in MatchLevel:
        normalise = _NORMALISERS[level]
        keys = [normalise(line) for line in text.bodies]
        want = [normalise(line) for line in old]
        expected = _reference_matches(keys, want, start) if old and len(old) <= len(keys) else []
        assert _matches(text, old, start, level, at_end=False) == expected
        assert _matches(text, old, start, level, at_end=False, limit=1) == expected[:1]


@given(
    st.lists(st.integers(0, 1), max_size=16),
    st.lists(st.integers(0, 1), min_size=1, max_size=4),
    st.integers(0, 4),
    st.sampled_from([None, 1, 2]),
)
@example(hay=[0, 0, 0, 0], needle=[0, 0], start=0, limit=None)
@example(hay=[0, 1, 0, 1, 0, 0, 1, 0, 1, 0], needle=[0, 1, 0], start=1, limit=None)
def test_both_searches_find_every_match_overlapping_ones_included(
    hay: list[int], needle: list[int], start: int, limit: int | None
) -> None:
    # Two letters: long runs and self-overlapping patterns, where KMP's shifts matter.
    expected = [
        i for i in range(start, len(hay) - len(needle) + 1) if hay[i : i + len(needle)] == needle
    ]
    expected = expected if limit is None else expected[:limit]
    assert search.find_ids(hay, needle, start, limit) == expected
    assert search.find_indexed(hay, needle, search.positions(hay), start, limit) == expected


def _reference_find(
    image: _Image,
    old: list[str],
    pos: int,
    level: MatchLevel,
    at_start: bool,
    at_end: bool,
    old_no_final_newline: bool,
) -> int | None:
    """The outward search as it was: every place in the order of ``_search_rank``."""
    n, m = len(image.bodies), len(old)
    if at_start:
        pos = 0
    elif at_end:
        pos = n - m
    if not 0 <= pos <= n:
        pos = n
    normalise = _NORMALISERS[level]
    want = [normalise(line) for line in old]
    keys = [normalise(b) for b in image.bodies]
    for start in sorted(range(n + 1), key=lambda s: _search_rank(s, pos)):
        stop = start + m
        if stop > n or (at_start and start != 0) or (at_end and stop != n):
            continue
        if any(image.patched[start:stop]) or keys[start:stop] != want:
            continue
        if (
            m
            and level is MatchLevel.EXACT
            and stop == n
            and ((image.ends[-1] == "") != old_no_final_newline)
        ):
            continue
        return start
    return None


@given(
    # Mostly "a": the hunk's lines are rare, so its nearest place is often far from the hint.
    st.lists(st.tuples(st.sampled_from(["a"] * 6 + ["b", " a", "a "]), st.booleans()), max_size=60),
    st.lists(st.sampled_from(["a", "b", "a "]), max_size=4),
    st.integers(-3, 65),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_unified_placement_is_that_of_the_outward_search(
    file: list[tuple[str, bool]],
    old: list[str],
    pos: int,
    at_start: bool,
    at_end: bool,
    no_newline: bool,
    last_ends: bool,
) -> None:
    bodies = [line for line, _ in file]
    ends = ["\n"] * len(bodies)
    if ends and not last_ends:
        ends[-1] = ""
    image = _Image(bodies, ends, [patched for _, patched in file])
    for level in MatchLevel:
        args = (old, pos, level)
        flags = {"at_start": at_start, "at_end": at_end, "old_no_final_newline": no_newline}
        expected = _reference_find(image, *args, at_start, at_end, no_newline)
        assert image.find(*args, **flags) == expected
        # With a first window of one line, the windows double several times on these files.
        first_radius = apply_module.FIRST_RADIUS
        apply_module.FIRST_RADIUS = 1
        try:
            assert image.find(*args, **flags) == expected
        finally:
            apply_module.FIRST_RADIUS = first_radius


def test_a_far_hint_still_finds_the_nearest_place_beyond_the_first_window() -> None:
    # Matches at 3,000 and 9,000 lines; the hint at 7,000 is nearer the second, and the first
    # window (1,024 lines around the hint) holds neither.
    bodies = ["x"] * 10_000
    bodies[3_000] = bodies[9_000] = "m"
    image = _Image(bodies, ["\n"] * len(bodies), [False] * len(bodies))
    assert (
        image.find(
            ["m"], 7_000, MatchLevel.EXACT, at_start=False, at_end=False, old_no_final_newline=False
        )
        == 9_000
    )
    hunk = Hunk(
        lines=(HunkLine(kind="-", text="m"), HunkLine(kind="+", text="n")),
        old_start=5_000,
        new_start=5_000,
    )
    out, _ = apply_hunks(("\n".join(bodies) + "\n").encode(), [hunk], path="f")
    assert out.decode().splitlines()[3_000] == "n"  # 5,000 is nearer 3,000


# ---------------------------------------------------------------- a long 'diff --git' line


def _reference_split(rest: str) -> tuple[str, str] | None:
    """The names of an unquoted 'diff --git' line as they were found: every space tried."""
    spaces = [i for i, ch in enumerate(rest) if ch == " "]
    for at in spaces:
        old, new = rest[:at], rest[at + 1 :]
        old_rest, new_rest = old.partition("/")[2], new.partition("/")[2]
        if old == new or ("/" in old and "/" in new and old_rest and old_rest == new_rest):
            return old, new
    if len(spaces) == 1:
        return rest[: spaces[0]], rest[spaces[0] + 1 :]
    return None


@given(st.text(alphabet="ab/ ", max_size=24))
def test_git_names_are_split_where_every_space_tried_splits_them(rest: str) -> None:
    assert unified._split_git_names(rest) == _reference_split(rest)


def test_a_long_git_header_line_is_split_without_trying_every_space(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Trying every space copies the line once per space: a 1 MiB line of spaces took minutes.
    calls = []
    real = unified._same_after_prefix

    def counted(old: str, new: str) -> bool:
        calls.append(1)
        return real(old, new)

    monkeypatch.setattr(unified, "_same_after_prefix", counted)
    name = "d/" * 5_000 + "f.txt"
    line = f"diff --git a/{name} b/{name}\n"
    patch = parse(f"{line}old mode 100644\nnew mode 100755\n")
    assert patch.operations[0].path == name
    assert unified._split_git_names("x " * 10_000) is None
    assert len(calls) <= 4
