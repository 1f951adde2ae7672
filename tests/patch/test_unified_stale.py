"""Unified hunks whose line numbers are stale: each line of the file is made an id once.

Every hunk's search goes outward from its hinted line in doubling windows; the file's lines are
turned into ids (hashed) once per ladder level and kept up to date as hunks apply, not again for
every window of every hunk. The work is counted (``search.interned()``), not timed.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from applyonce.patch import Hunk, HunkLine, MatchLevel, apply_hunks, parse, search
from applyonce.patch.apply import _Image

N = 20_000


def test_hunks_with_stale_line_numbers_hash_each_line_once() -> None:
    data = "".join(f"line {i}\n" for i in range(N)).encode()
    body = "".join(
        f"@@ -2,3 +2,3 @@\n line {i - 1}\n-line {i}\n+L{i}\n line {i + 1}\n"
        for i in range(70, N, 70)
    )
    hunks = parse("--- a/big.txt\n+++ b/big.txt\n" + body).operations[0].hunks  # type: ignore[union-attr]
    before = search.interned()
    out, levels = apply_hunks(data, hunks, path="big.txt")
    work = search.interned() - before
    assert levels == [MatchLevel.EXACT] * len(hunks)
    lines = out.decode().splitlines()
    last = 70 * ((N - 1) // 70)
    assert lines[70] == "L70" and lines[last] == f"L{last}" and lines[71] == "line 71"
    # The file once, plus each hunk's lines (the search used to hash every window again:
    # about 10 million lines here).
    assert work <= 2 * N + 10 * len(hunks), work


_LINES = st.sampled_from(["a", "b", "a ", " b", "c"])


@given(
    st.lists(_LINES, min_size=1, max_size=30),
    st.integers(0, 29),
    st.integers(0, 3),
    st.lists(_LINES, max_size=3),
    st.lists(_LINES, min_size=1, max_size=4),
    st.integers(0, 30),
    st.sampled_from(list(MatchLevel)),
)
def test_a_search_after_a_hunk_applied_is_that_on_a_fresh_image(
    bodies: list[str],
    start: int,
    removed: int,
    added: list[str],
    old: list[str],
    pos: int,
    level: MatchLevel,
) -> None:
    # The ids kept for every level the image has searched must follow its lines as hunks apply.
    n = len(bodies)
    start = min(start, n)
    removed = min(removed, n - start)
    image = _Image(list(bodies), ["\n"] * n, [False] * n)
    flags = {"at_start": False, "at_end": False, "old_no_final_newline": False}
    for each in MatchLevel:
        image.find(old, pos, each, **flags)  # the ids of every level made before the change
    lines = [HunkLine(kind="-", text=line) for line in bodies[start : start + removed]]
    lines += [HunkLine(kind="+", text=line) for line in added]
    hunk = Hunk(lines=tuple(lines), old_start=start + 1, new_start=start + 1)
    image.replace(start, hunk, removed, lambda line: (line, "\n"))
    fresh = _Image(list(image.bodies), list(image.ends), list(image.patched))
    assert image.find(old, pos, level, **flags) == fresh.find(old, pos, level, **flags)
