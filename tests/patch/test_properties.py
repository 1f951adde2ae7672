"""Property tests for the pure patch layer (hypothesis, derandomized so CI runs are reproducible).

(a) ``parse_codex(render_codex(p))`` gives back ``p`` for generated patches;
(b) applying a generated edit as a hunk gives the same bytes as editing the lines directly.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from applyonce.patch import (
    Hunk,
    HunkLine,
    MatchLevel,
    Patch,
    UpdateFile,
    apply_hunks,
    parse_codex,
    render_codex,
)
from tests.support.codex_patches import (
    codex_patches,
)

PROPERTY = settings(derandomize=True, max_examples=150, deadline=None)

# ---------------------------------------------------------------- (a) render / parse round trip


@PROPERTY
@given(codex_patches)
def test_render_then_parse_round_trips(patch: Patch) -> None:
    text = render_codex(patch)
    assert parse_codex(text).model_dump() == patch.model_dump()
    # CRLF and a heredoc wrapper are just other spellings of the same patch.
    assert parse_codex(text.replace("\n", "\r\n")).model_dump() == patch.model_dump()
    assert parse_codex("apply_patch <<'EOF'\n" + text + "EOF").model_dump() == patch.model_dump()


@PROPERTY
@given(codex_patches)
def test_render_is_a_fixed_point(patch: Patch) -> None:
    text = render_codex(patch)
    assert render_codex(parse_codex(text)) == text


# ---------------------------------------------------------------- (b) apply reproduces the edit

_ENDINGS = st.sampled_from(["\n", "\r\n", "\r"])
_body = st.text(
    alphabet=st.characters(exclude_characters="\r\n", exclude_categories=["Cs", "Cc"]),
    max_size=12,
).map(str.strip)


@st.composite
def _edit_case(draw: st.DrawFn) -> tuple[bytes, Hunk, bytes, bool]:
    """A file, a hunk that edits it, the bytes of the edit done directly, and whether to fuzz."""
    ending = draw(_ENDINGS)
    bom = draw(st.booleans())
    final_newline = draw(st.booleans())
    fuzz = draw(st.booleans())
    n = draw(st.integers(1, 12))
    # "L<i>:" keeps every line unique even once whitespace is stripped: one match only.
    bodies = [f"L{i}:{draw(_body)}" for i in range(n)]
    if fuzz:
        # The file has padding the patch will not have: found at RSTRIP/STRIP, kept for context.
        pads = st.sampled_from(["", " ", "\t", "  "])
        bodies = [draw(pads) + b + draw(pads) for b in bodies]
    ends = [ending] * n
    if not final_newline:
        ends[-1] = ""

    start = draw(st.integers(0, n))
    stop = draw(st.integers(start, n))
    replacement = draw(st.lists(_body.map(lambda s: "new:" + s), max_size=4))
    before = draw(st.integers(0, 3))
    after = draw(st.integers(0, 3))
    ctx_before = bodies[max(0, start - before) : start]
    ctx_after = bodies[stop : stop + after]
    removed = bodies[start:stop]
    if not removed and not replacement:
        replacement = ["new:added"]
    if not (ctx_before or removed or ctx_after):
        # A hunk with nothing to find is a pure addition, which goes to the end of the file.
        ctx_before = bodies[start - 1 : start] if start else []
        ctx_after = [] if start else bodies[:1]

    def patch_text(body: str) -> str:
        return body.strip() if fuzz else body

    hunk = Hunk(
        lines=(
            *(HunkLine(kind=" ", text=patch_text(b)) for b in ctx_before),
            *(HunkLine(kind="-", text=patch_text(b)) for b in removed),
            *(HunkLine(kind="+", text=r) for r in replacement),
            *(HunkLine(kind=" ", text=patch_text(b)) for b in ctx_after),
        )
    )

    # The edit done directly: untouched lines keep their bytes and endings, new lines take the
    # file's ending ("\n" when it has none: one line, no final newline), and only the last line
    # of the result may lack one.
    if not any(ends):
        ending = "\n"
    new_pairs = [
        *zip(bodies[:start], ends[:start], strict=True),
        *((r, ending) for r in replacement),
        *zip(bodies[stop:], ends[stop:], strict=True),
    ]
    new_pairs = [
        (b, e or ending) if i < len(new_pairs) - 1 else (b, e) for i, (b, e) in enumerate(new_pairs)
    ]
    prefix = "\ufeff" if bom else ""
    data = (prefix + "".join(b + e for b, e in zip(bodies, ends, strict=True))).encode()
    expected = (prefix + "".join(b + e for b, e in new_pairs)).encode()
    return data, hunk, expected, fuzz


@PROPERTY
@given(_edit_case())
def test_apply_reproduces_the_direct_edit(case: tuple[bytes, Hunk, bytes, bool]) -> None:
    data, hunk, expected, fuzz = case
    new, levels = apply_hunks(data, [hunk], path="f.txt")
    assert new == expected
    if not fuzz:
        assert levels == [MatchLevel.EXACT]


@PROPERTY
@given(_edit_case(), st.sampled_from(["\n", "\r\n"]))
def test_apply_does_not_depend_on_the_patch_spelling(
    case: tuple[bytes, Hunk, bytes, bool], newline: str
) -> None:
    """Rendering the hunk as Codex text (any line ending) and parsing it back applies the same."""
    data, hunk, expected, _fuzz = case
    patch = Patch(operations=(UpdateFile(path="f.txt", hunks=(hunk,)),))
    (op,) = parse_codex(render_codex(patch).replace("\n", newline)).operations
    assert isinstance(op, UpdateFile)
    assert apply_hunks(data, op.hunks, path="f.txt")[0] == expected
