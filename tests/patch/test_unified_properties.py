"""Property tests for unified diffs (hypothesis, derandomized so CI runs are reproducible).

(a) diff / apply round trip: for generated files and edits, the unified diff that Python's
    ``difflib`` writes (0, 1 or 3 lines of context), parsed and applied to the old file, gives the
    new file — also when the diff is applied to the old file with lines added above it (every hunk
    then sits away from its line numbers);
(b) a Codex patch rendered from the same hunks (bare ``@@``) has the same identity dump.
"""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from applyonce.patch import UpdateFile, apply_hunks, parse_codex, parse_unified, render_codex
from applyonce.patch.model import Patch
from tests.conftest import without_line_numbers

PROPERTY = settings(derandomize=True, max_examples=200, deadline=None)

# A small alphabet, so lines repeat and the context is often ambiguous, and some unique lines.
_line = st.one_of(
    st.sampled_from(["", "a", "b", "c", "x = 1", "    pass", "}", "-- d", "++ p", "@@ q"]),
    st.integers(0, 999).map(lambda i: f"line {i}"),
)
_lines = st.lists(_line, max_size=25)
# An edit: at some fraction of the file, remove some lines and insert others.
_edits = st.lists(
    st.tuples(st.floats(0, 1), st.integers(0, 3), st.lists(_line, max_size=3)),
    min_size=1,
    max_size=3,
)


def _edited(lines: list[str], edits: list[tuple[float, int, list[str]]]) -> list[str]:
    out = list(lines)
    for where, remove, insert in edits:
        at = int(where * len(out))
        out[at : at + remove] = insert
    return out


def _text(lines: list[str]) -> bytes:
    return "".join(line + "\n" for line in lines).encode()


def _diff(old: list[str], new: list[str], context: int) -> str:
    return "".join(
        difflib.unified_diff(
            [line + "\n" for line in old],
            [line + "\n" for line in new],
            "a/f.txt",
            "b/f.txt",
            n=context,
        )
    )


def _occurrences(block: list[str], lines: list[str]) -> int:
    return sum(lines[i : i + len(block)] == block for i in range(len(lines) - len(block) + 1))


@PROPERTY
@given(
    old=_lines,
    edits=_edits,
    context=st.sampled_from([0, 1, 3]),
    prefix=st.lists(st.integers(0, 99).map(lambda i: f"above {i}"), min_size=1, max_size=5),
)
def test_difflib_diff_applies_back(
    old: list[str], edits: list[tuple[float, int, list[str]]], context: int, prefix: list[str]
) -> None:
    new = _edited(old, edits)
    text = _diff(old, new, context)
    if not text:
        return  # no change, no diff
    (op,) = parse_unified(text).operations
    assert isinstance(op, UpdateFile) and op.path == "f.txt"
    assert apply_hunks(_text(old), op.hunks, path="f.txt")[0] == _text(new)
    # Drift: lines above the file (unlike any in it) move every hunk. A hunk that starts at line 1
    # (or 0) must match at the start, and one without context is placed by its line numbers
    # (which the drift made wrong); every other hunk whose lines occur once in the file is found
    # by them, wherever they moved.
    by_context = all(
        h.old_start is not None
        and h.old_start > 1
        and any(line.kind == " " for line in h.lines)
        and _occurrences(h.old_lines, old) == 1
        for h in op.hunks
    )
    if by_context:
        moved = apply_hunks(_text(prefix + old), op.hunks, path="f.txt")[0]
        assert moved == _text(prefix + new)


@PROPERTY
@given(old=_lines.filter(bool), edits=_edits, context=st.sampled_from([1, 3]))
def test_codex_rendering_of_a_unified_diff_has_its_identity(
    old: list[str], edits: list[tuple[float, int, list[str]]], context: int
) -> None:
    text = _diff(old, _edited(old, edits), context)
    if not text:
        return
    unified = parse_unified(text)
    codex = parse_codex(render_codex(Patch(operations=unified.operations)))
    # The same change but for the line numbers, which only the unified diff carries.
    assert codex.model_dump() == without_line_numbers(unified.model_dump())
