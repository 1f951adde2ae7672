"""Property tests for the pure patch layer (hypothesis, derandomized so CI runs are reproducible).

(a) ``parse_codex(render_codex(p))`` gives back ``p`` for generated patches;
(b) applying a generated edit as a hunk gives the same bytes as editing the lines directly.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from applyonce.patch import (
    AddFile,
    DeleteFile,
    Hunk,
    HunkLine,
    MatchLevel,
    Patch,
    UpdateFile,
    apply_hunks,
    parse_codex,
    render_codex,
)

PROPERTY = settings(derandomize=True, max_examples=150, deadline=None)

# ---------------------------------------------------------------- (a) render / parse round trip

# Line text: any characters except line breaks ("\n" ends a patch line; "\r\n" is read as "\n")
# and lone surrogates (not encodable). Everything else — leading/trailing spaces, tabs, "@@",
# "***", "+", "-", typographic punctuation, U+2028 — must survive the round trip.
_text = st.text(
    alphabet=st.characters(exclude_characters="\r\n", exclude_categories=["Cs"]),
    max_size=20,
)
# Mix in texts that look like parts of the grammar, so they are actually exercised.
_tricky = st.sampled_from(
    [
        "",
        " ",
        "\t",
        "@@",
        "@@ def f():",
        "+",
        "-",
        "*** End Patch",
        "*** Begin Patch",
        "*** End of File ",  # trailing space only matters when stripped: excluded for context
        "  *** Add File: x",
        "*** Add File:",  # no path: not a header, so a context line may say it
        "*** Move to:",
        "EOF",
    ]
)
_line_text = st.one_of(_text, _tricky)

# Marker spellings that a *context* line may not have once stripped. This is the one exclusion,
# and it is a documented leniency, not a bug: "padding around markers" means a line whose stripped
# form is a file header, "*** Move to: " or "*** End of File" is read as that marker, so a context
# line " *** Add File: x" cannot round-trip. ('-'/'+' lines are safe: they strip to "-…"/"+…".)
_MARKER_PREFIXES = ("*** Add File: ", "*** Delete File: ", "*** Update File: ", "*** Move to: ")


def _context_safe(text: str) -> bool:
    stripped = text.strip()
    return not (stripped.startswith(_MARKER_PREFIXES) or stripped == "*** End of File")


_component = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,10}", fullmatch=True).filter(
    lambda c: c not in (".", "..")
)
_path = st.lists(_component, min_size=1, max_size=4).map("/".join)


@st.composite
def _hunk_lines(draw: st.DrawFn) -> tuple[HunkLine, ...]:
    kinds = draw(st.lists(st.sampled_from([" ", "-", "+"]), min_size=1, max_size=6))
    if all(kind == " " for kind in kinds):  # a hunk must change something
        kinds[draw(st.integers(0, len(kinds) - 1))] = draw(st.sampled_from(["-", "+"]))
    out = []
    for kind in kinds:
        text = draw(_line_text.filter(_context_safe) if kind == " " else _line_text)
        out.append(HunkLine(kind=kind, text=text))
    return tuple(out)


# Anchors are stripped and a leading unified-diff range ("-1,2 +1,3 @@") is dropped by the parser,
# so generated anchors are already stripped, non-empty and not range-shaped.
_UNIFIED_RANGE = re.compile(r"^-\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
_anchor = _line_text.map(str.strip).filter(lambda a: bool(a) and not _UNIFIED_RANGE.match(a))

_hunk = st.builds(
    Hunk,
    anchors=st.lists(_anchor, max_size=3).map(tuple),
    lines=_hunk_lines(),
    end_of_file=st.booleans(),
)

_add = st.builds(
    AddFile,
    path=_path,
    # added content is whole lines: the format cannot say "no final newline" for an added file
    content=st.lists(_line_text, max_size=5).map(lambda ls: "".join(line + "\n" for line in ls)),
)
_delete = st.builds(DeleteFile, path=_path)


@st.composite
def _update(draw: st.DrawFn) -> UpdateFile:
    move_to = draw(st.none() | _path)
    # an update needs a hunk unless it is a pure rename
    hunks = draw(st.lists(_hunk, min_size=0 if move_to else 1, max_size=3))
    return UpdateFile(path=draw(_path), move_to=move_to, hunks=tuple(hunks))


_patch = st.builds(
    Patch,
    operations=st.lists(st.one_of(_add, _delete, _update()), min_size=1, max_size=4).map(tuple),
)


@PROPERTY
@given(_patch)
def test_render_then_parse_round_trips(patch: Patch) -> None:
    text = render_codex(patch)
    assert parse_codex(text).model_dump() == patch.model_dump()
    # CRLF and a heredoc wrapper are just other spellings of the same patch.
    assert parse_codex(text.replace("\n", "\r\n")).model_dump() == patch.model_dump()
    assert parse_codex("apply_patch <<'EOF'\n" + text + "EOF").model_dump() == patch.model_dump()


@PROPERTY
@given(_patch)
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
