"""Hypothesis strategies for Codex patches (the model of ``applyonce.patch``): any line text, the
texts that look like the grammar, paths, hunks, and whole patches."""

from __future__ import annotations

import re

from hypothesis import strategies as st

from applyonce.patch import (
    AddFile,
    DeleteFile,
    Hunk,
    HunkLine,
    Patch,
    UpdateFile,
)

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


codex_patches = st.builds(
    Patch,
    operations=st.lists(st.one_of(_add, _delete, _update()), min_size=1, max_size=4).map(tuple),
)
