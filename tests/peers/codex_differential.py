"""Differential cases: applyonce's Codex ``apply_patch`` against the real Codex binary.

One case, from one seed: a random small tree (repeated lines, blank lines, CRLF, lone CR and mixed
endings, a UTF-8 BOM, no final newline, typographic punctuation) and a model-style Codex patch over
it (fuzzy context, ``@@`` anchors, ``*** End of File`` hunks, pure additions, moves, adds, deletes,
several files; the leniency spellings agents emit; and some broken patches). The case is applied

* by the real Codex binary (``codex --codex-run-as-apply-patch PATCH`` in a temp dir), and
* by applyonce in-process (``parse`` + path normalisation + ``plan`` over the same tree),

and both results (success or failure, and the resulting tree byte for byte) are compared.

A difference is only *explained* when an independent oracle derives both results exactly: the
oracle below is a small line-list model of the Codex algorithm, written from observed behaviour of
Codex 0.169, with one switch per documented deliberate difference (``SWITCHES``). With every
switch off it must reproduce the real Codex, with every switch on it must reproduce applyonce, on
every case. A case where the two tools differ is attributed to the switches whose flip changes the
oracle's result; a case where either equality fails is *unexplained*.

Used by ``tests/peers/test_differential_codex.py`` (a bounded number of seeds) and
``benchmarks/bench_codex_differential.py`` (as many as asked).
"""

from __future__ import annotations

import glob
import os
import random
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from applyonce.core.identity import ApplyPatchArgs
from applyonce.core.plan import MODE_FILE, EntryKind, plan
from applyonce.errors import ApplyOnceError
from applyonce.patch import parse

CODEX_VERSION = "0.169.0"
_PLATFORM_BIN = "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"

Tree = dict[str, bytes]


def codex_cache_dir() -> Path:
    """Where ``.ci/run`` installs the pinned ``@openai/codex`` package (outside the clone)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "applyonce" / f"codex-{CODEX_VERSION}"


def find_codex_binary() -> str | None:
    """``$APPLYONCE_CODEX_BIN``, else the platform binary in the cache folder, else None."""
    explicit = os.environ.get("APPLYONCE_CODEX_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    prefix = codex_cache_dir()
    default = prefix / _PLATFORM_BIN
    if os.access(default, os.X_OK):
        return str(default)
    # Other platforms' packages: @openai/codex-<os>-<arch>/vendor/<triple>/bin/codex.
    pattern = str(prefix / "node_modules/@openai/codex-*/vendor/*/bin/codex")
    return next((p for p in sorted(glob.glob(pattern)) if os.access(p, os.X_OK)), None)


def codex_binary_or_skip(binary: str | None) -> str:
    """``binary`` (found by :func:`find_codex_binary` at import, before a test's HOME moves), or
    the test skipped without it — failed when ``APPLYONCE_REQUIRE_CODEX=1`` (CI) asks for it."""
    if binary is None:
        message = "the Codex binary is missing (set APPLYONCE_CODEX_BIN or run .ci/run)"
        if os.environ.get("APPLYONCE_REQUIRE_CODEX") == "1":
            pytest.fail(message + "; APPLYONCE_REQUIRE_CODEX=1")
        pytest.skip(message)
    return binary


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class Result:
    """What a tool did: success, and the tree it left (the input tree after a refusal, for an
    atomic tool; whatever Codex had written so far, for Codex)."""

    ok: bool
    tree: Mapping[str, bytes]
    message: str = ""

    def same(self, other: Result) -> bool:
        return self.ok == other.ok and dict(self.tree) == dict(other.tree)

    def describe(self, before: Mapping[str, bytes]) -> str:
        lines = [f"    ok={self.ok} {self.message[:200]!r}"]
        for path in sorted(set(before) | set(self.tree)):
            old, new = before.get(path), self.tree.get(path)
            if old != new:
                lines.append(f"    {path}: {new!r}" if new is not None else f"    {path}: (gone)")
        if len(lines) == 1:
            lines.append("    (tree unchanged)")
        return "\n".join(lines)


def _write_tree(root: Path, tree: Mapping[str, bytes]) -> None:
    for path, data in tree.items():
        full = root.joinpath(*path.split("/"))
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(data)


def _snapshot(root: Path) -> Tree:
    files: Tree = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            full = Path(dirpath) / name
            files[full.relative_to(root).as_posix()] = full.read_bytes()
    return files


def run_codex(
    binary: str, tree: Mapping[str, bytes], patch_text: str, *, workdir: Path, cwd: str = ""
) -> Result:
    """Apply ``patch_text`` with the real Codex binary in a fresh directory holding ``tree``
    (run in its folder ``cwd``, as after ``cd cwd``)."""
    with tempfile.TemporaryDirectory(dir=workdir) as top:
        root = Path(top)
        _write_tree(root, tree)
        (root / cwd).mkdir(parents=True, exist_ok=True)
        # argv[0] "apply_patch" makes the codex binary run as its apply_patch tool.
        proc = subprocess.run(
            ["apply_patch", patch_text],
            executable=binary,
            cwd=root / cwd,
            capture_output=True,
            timeout=60,
            env={"PATH": os.environ.get("PATH", ""), "HOME": top, "NO_COLOR": "1"},
        )
        message = (proc.stdout + proc.stderr).decode("utf-8", "replace").replace(top, "<dir>")
        if proc.returncode not in (0, 1):
            message = f"exit {proc.returncode}: {message}"
        return Result(proc.returncode == 0, _snapshot(root), message.strip())


class TreeReader:
    """A :class:`~applyonce.plan.TreeReader` over an in-memory tree."""

    def __init__(self, tree: Mapping[str, bytes]) -> None:
        self.tree = tree

    def kind(self, path: str) -> EntryKind | None:
        if path in self.tree:
            return "file"
        if any(name.startswith(path + "/") for name in self.tree):
            return "dir"
        return None

    def read(self, path: str) -> tuple[bytes, int]:
        return self.tree[path], MODE_FILE


def run_applyonce(tree: Mapping[str, bytes], patch_text: str) -> Result:
    """Apply ``patch_text`` with applyonce's pure engine; a refusal leaves ``tree`` as it was."""
    try:
        patch = parse(patch_text, "codex")
        args = ApplyPatchArgs.from_patch(patch, ref="refs/heads/main", repo_root=None)
        tree_plan = plan(args.patch(), TreeReader(tree))
    except ApplyOnceError as exc:
        return Result(False, dict(tree), f"{exc.kind}: {exc.one_line()}")
    out = dict(tree)
    for path in tree_plan.removed:
        del out[path]
    for change in tree_plan.changes:
        if change.content is None:
            out.pop(change.path, None)
        else:
            out[change.path] = change.content
    return Result(True, out, "ok")


# ------------------------------------------------------------------------------------ oracle

# One switch per documented deliberate difference between applyonce and Codex 0.169. Off: the
# oracle does what Codex does; on: what applyonce does. The text is the rule, for the README.
SWITCHES: dict[str, str] = {
    "heredoc_command": (
        "an `apply_patch <<'EOF'` / `apply_patch <<\"EOF\"` / `apply_patch <<EOF` first line is a "
        "heredoc wrapper (Codex's own parser only strips a bare `<<'EOF'`, `<<\"EOF\"` or `<<EOF` "
        "line; the command form is only understood by its shell-command layer)"
    ),
    "blank_between_operations": (
        "blank lines right after `*** Begin Patch`, or after an Add File's `+` lines or a Delete "
        "File line, are skipped (Codex: `'' is not a valid hunk header`)"
    ),
    "padded_headers": (
        "a padded `  *** Add/Delete/Update File:` line after an update hunk ends the hunk and is "
        "a header (Codex: a context line ` *** …`, so the hunk fails to match)"
    ),
    "padded_markers": (
        "a padded `  *** Move to:` or `  *** End of File` line is that marker (Codex only "
        "recognises them unpadded; padded, they are context lines)"
    ),
    "nested_anchors": (
        "several `@@ anchor` lines in a row narrow the search in turn (Codex: a second `@@` line "
        "is `Unexpected line found in update hunk`)"
    ),
    "move_without_hunk": (
        "Update + Move to without any hunk is a rename (Codex: `Update file hunk … is empty`)"
    ),
    "anchored_insert": (
        "a pure addition (no old lines) with an `@@ anchor` and no `*** End of File` is inserted "
        "right after the anchor line (Codex appends it at the end of the file)"
    ),
    "trailing_blank_separator": (
        "a hunk (without `*** End of File`) whose lines are `+` lines followed only by empty lines "
        "(the patch text's own empty lines, not ` `) is refused when the empty lines, read as "
        "context, are in the file and would put the `+` lines elsewhere than read as a separator "
        "(appended, or right after the anchor); otherwise it is a pure addition of the `+` lines "
        "(Codex takes the blanks as context: it inserts before the first blank line from the "
        "search position, or at the search position when the file has none there)"
    ),
    "eof_addition_at_end": (
        "a `*** End of File` hunk that is an addition once its last empty old line is dropped "
        "(`+` lines, an empty line, `*** End of File`, on a file not ending in a blank line) is "
        "appended at the end (Codex inserts it at the search position: at the top)"
    ),
    "ambiguous": (
        "a hunk's old lines are placed by everything the patch says: of their places from the "
        "search position (at the first ladder level that matches at all), those inside the "
        "block its `@@` anchor line opens (the lines after it, up to the next non-blank line "
        "indented no deeper that does not start with a closing bracket; a nested anchor's inside "
        "the one before), when there are some; then "
        "those after the previous hunk that leave room for the hunks after it; a hunk (not "
        "context-only, not `*** End of File`) with more than one place left rejects the patch "
        "(`ambiguous-context`); Codex takes the first place from the search position"
    ),
    "unicode_extra": (
        "the unicode level also folds U+2000 U+2001 (spaces), U+FE58 U+FE63 U+FF0D (dashes), "
        "U+2032 U+FF07 (quotes), U+2033 U+FF02 (double quotes) and U+2026 (to `...`); Codex folds "
        "only U+2010-2015 U+2212, U+2018-201B, U+201C-201F, U+00A0 U+2002-200A U+202F U+205F "
        "U+3000"
    ),
    "bom": (
        "a UTF-8 BOM is kept and ignored for matching (Codex matches it as part of the first "
        "line's text, so a hunk naming the first line fails)"
    ),
    "dominant_ending": (
        "added lines (and lines that get an ending) take the file's dominant line ending, ties to "
        "the first seen (Codex: the first line's ending, `\\n` when it has none)"
    ),
    "keep_missing_newline": (
        "a file without a final newline keeps it missing unless the patch changes or appends "
        "after its last line (Codex always ends the file with a line ending)"
    ),
    "unique_paths": (
        "a path written by two operations (a move writes both ends), and a move to itself, are "
        "refused (Codex applies the operations in turn; a move to itself deletes the file)"
    ),
    "refuse_noop": (
        "a patch that leaves every file as it was (say, only a context-only hunk) is refused, "
        "never an empty commit (Codex reports success)"
    ),
    "no_overwrite": (
        "an `Add File` or a `Move to` onto a path that exists is refused (`already-exists`, "
        "with a hint to update the file instead); Codex replaces the file"
    ),
    "atomic": (
        "a failure anywhere changes nothing (Codex keeps the operations before the failing one "
        "written)"
    ),
}

# Differences found by this harness that are not (yet) documented: they are modelled, so a case is
# still derived exactly, but a case that needs one of them is a *finding*, which fails the test,
# until applyonce agrees with Codex (then the switch goes) or the difference is documented (then
# it moves to SWITCHES).
PENDING: dict[str, str] = {}

CODEX = {name: False for name in {**SWITCHES, **PENDING}}
APPLYONCE = {name: True for name in {**SWITCHES, **PENDING}}

BOM = "\ufeff"
BEGIN, END = "*** Begin Patch", "*** End Patch"
ADD, DELETE, UPDATE = "*** Add File: ", "*** Delete File: ", "*** Update File: "
MOVE, EOF_MARKER = "*** Move to: ", "*** End of File"

_CODEX_FOLD = {
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a", " "),
    **dict.fromkeys("\u202f\u205f\u3000", " "),
}
_EXTRA_FOLD = {
    **dict.fromkeys("\u2000\u2001", " "),
    **dict.fromkeys("\ufe58\ufe63\uff0d", "-"),
    **dict.fromkeys("\u2032\uff07", "'"),
    **dict.fromkeys("\u2033\uff02", '"'),
    "\u2026": "...",
}
_FOLD_CODEX = str.maketrans(_CODEX_FOLD)
_FOLD_ALL = str.maketrans({**_CODEX_FOLD, **_EXTRA_FOLD})
_ENDING = re.compile(r"([^\r\n]*)(\r\n|\n|\r|$)")


# How applyonce's refusal of a hunk's places begins (``Result.detail``: ``kind: message``).
REFUSED_PLACES = "ambiguous-context:"


class OracleError(Exception):
    """The oracle's model refuses the patch."""


@dataclass
class _Hunk:
    anchors: list[str]
    lines: list[tuple[str, str]]  # (kind, text), kind in " -+"
    eof: bool = False
    blank: set[int] = field(default_factory=set)  # lines that were empty in the patch text


@dataclass
class _Op:
    kind: str  # add / delete / update
    path: str
    content: str = ""
    move_to: str | None = None
    hunks: list[_Hunk] = field(default_factory=list)


def _patch_lines(text: str, sw: Mapping[str, bool]) -> list[str]:
    """The lines between the markers: ``trim()`` the text, split like Rust's ``lines()``, strip a
    heredoc wrapper, check the two markers."""
    lines = [line.removesuffix("\r") for line in text.strip().split("\n")]
    wrappers = {"<<EOF", "<<'EOF'", '<<"EOF"'}
    if sw["heredoc_command"]:
        wrappers |= {f"{cmd} {w}" for cmd in ("apply_patch", "applypatch") for w in wrappers}
    wrapped = len(lines) >= 4 and lines[0].strip() in wrappers and lines[-1].endswith("EOF")
    if wrapped and not (lines[0].strip() == BEGIN and lines[-1].strip() == END):
        lines = lines[1:-1]
    if lines[0].strip() != BEGIN:
        raise OracleError("first line must be *** Begin Patch")
    if len(lines) < 2 or lines[-1].strip() != END:
        raise OracleError("last line must be *** End Patch")
    return lines[1:-1]


def oracle_parse(text: str, sw: Mapping[str, bool]) -> list[_Op]:
    lines = _patch_lines(text, sw)
    ops: list[_Op] = []
    i = 0
    while i < len(lines):
        first = lines[i].strip()
        if not first and sw["blank_between_operations"]:
            i += 1
            continue
        if first.startswith(ADD):
            i += 1
            content: list[str] = []
            while i < len(lines) and lines[i].startswith("+"):
                content.append(lines[i][1:] + "\n")
                i += 1
            ops.append(_Op("add", first[len(ADD) :], content="".join(content)))
        elif first.startswith(DELETE):
            ops.append(_Op("delete", first[len(DELETE) :]))
            i += 1
        elif first.startswith(UPDATE):
            op = _Op("update", first[len(UPDATE) :])
            i += 1
            if i < len(lines):
                move = lines[i].strip() if sw["padded_markers"] else lines[i]
                if move.startswith(MOVE):
                    op.move_to = move[len(MOVE) :]
                    i += 1
            while i < len(lines):
                if not lines[i].strip() and op.hunks:
                    i += 1  # blank lines between hunks (before the first one they are context)
                    continue
                if lines[i].startswith("***"):
                    break
                if sw["padded_headers"] and lines[i].strip().startswith((ADD, DELETE, UPDATE)):
                    break
                i = _parse_hunk(lines, i, op, sw)
            if not op.hunks and not (op.move_to is not None and sw["move_without_hunk"]):
                raise OracleError(f"update of {op.path} is empty")
            ops.append(op)
        else:
            raise OracleError(f"{first!r} is not a valid hunk header")
    if not ops:
        raise OracleError("no files were modified")
    return ops


def _parse_hunk(lines: list[str], i: int, op: _Op, sw: Mapping[str, bool]) -> int:
    hunk = _Hunk([], [])
    header = 0
    while i < len(lines) and (lines[i] == "@@" or lines[i].startswith("@@ ")):
        if header and not sw["nested_anchors"]:
            raise OracleError("unexpected line in update hunk (a second @@ line)")
        anchor = lines[i][3:].rstrip()  # Codex trims the anchor's end
        if anchor.strip():
            hunk.anchors.append(anchor)
        header += 1
        i += 1
    if not header and op.hunks:
        raise OracleError(f"expected @@, found {lines[i]!r}")
    if i >= len(lines):
        raise OracleError("update hunk has no lines")
    while i < len(lines):
        line = lines[i]
        marker = line.strip() if sw["padded_markers"] else line
        if marker == EOF_MARKER:
            if not hunk.lines:
                raise OracleError("update hunk has no lines before *** End of File")
            hunk.eof = True
            i += 1
            break
        if line == "":
            hunk.blank.add(len(hunk.lines))
            hunk.lines.append((" ", ""))
        elif line[0] in " -+":
            if sw["padded_headers"] and line.strip().startswith((ADD, DELETE, UPDATE)):
                break
            hunk.lines.append((line[0], line[1:]))
        else:
            if not hunk.lines:
                raise OracleError(f"unexpected line in update hunk: {line!r}")
            break
        i += 1
    op.hunks.append(hunk)
    return i


def _normalisers(sw: Mapping[str, bool]) -> list:
    fold = _FOLD_ALL if sw["unicode_extra"] else _FOLD_CODEX
    return [
        lambda s: s,
        str.rstrip,
        str.strip,
        lambda s: s.strip().translate(fold).strip(),
    ]


def _positions(keys: list[str], want: list[str], start: int, eof: bool) -> list[int]:
    n, m = len(keys), len(want)
    if m > n:
        return []
    if eof:
        return [n - m] if n - m >= start and keys[n - m :] == want else []
    return [i for i in range(start, n - m + 1) if keys[i : i + m] == want]


def _seek(
    bodies: list[str], pattern: list[str], start: int, eof: bool, sw: Mapping[str, bool]
) -> list[int]:
    """The positions at the first ladder level that has any (Codex takes the first)."""
    for normalise in _normalisers(sw):
        keys = [normalise(b) for b in bodies]
        found = _positions(keys, [normalise(p) for p in pattern], start, eof)
        if found:
            return found
    return []


def _drop_last_empty(lines: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Codex's retry: the old lines without their last (empty) one, the new lines without their
    last one too when it is empty; a line keeps the sides it is still on."""
    old_at = [k for k, (kind, _) in enumerate(lines) if kind != "+"]
    new_at = [k for k, (kind, _) in enumerate(lines) if kind != "-"]
    drop_old = old_at[-1]
    drop_new = new_at[-1] if new_at and lines[new_at[-1]][1] == "" else None
    out: list[tuple[str, str]] = []
    for k, (kind, text) in enumerate(lines):
        on_old = kind != "+" and k != drop_old
        on_new = kind != "-" and k != drop_new
        if on_old or on_new:
            out.append((" " if on_old and on_new else "-" if on_old else "+", text))
    return out


def _dominant(ends: list[str]) -> str:
    counts = Counter(end for end in ends if end)
    if not counts:
        return "\n"
    best = max(counts.values())
    return next(end for end in ends if end and counts[end] == best)


def oracle_update(
    data: bytes, hunks: list[_Hunk], sw: Mapping[str, bool], chosen: list[int] | None = None
) -> bytes:
    """The file's new bytes; ``chosen`` gets each hunk's place (an addition's: where it goes)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise OracleError("not UTF-8") from None
    bom = sw["bom"] and text.startswith(BOM)
    if bom:
        text = text[1:]
    bodies: list[str] = []
    ends: list[str] = []
    for match in _ENDING.finditer(text):
        if not match.group(1) and not match.group(2):
            break
        bodies.append(match.group(1))
        ends.append(match.group(2))
    n = len(bodies)
    edits: list[tuple[int, int, list[tuple[str, str]]]] = []
    # Hunks with old lines: [edit index, places, old line count, never ambiguous]; placed below.
    pending: list[tuple[int, list[int], int, bool]] = []
    cursor = 0
    for hunk in hunks:
        blocks = []
        hi = n
        for anchor in hunk.anchors:
            found = _seek(bodies, [anchor], cursor, False, sw)
            if not found:
                raise OracleError(f"anchor {anchor!r} not found")
            # The block the anchor line opens: up to the next non-blank line indented no deeper,
            # inside the block of the anchor before.
            a = found[0]
            indent = len(bodies[a]) - len(bodies[a].lstrip())
            end = next(
                (
                    j
                    for j in range(a + 1, n)
                    if bodies[j].strip()
                    and len(bodies[j]) - len(bodies[j].lstrip()) <= indent
                    and bodies[j].lstrip()[0] not in ")]}"
                ),
                n,
            )
            hi = min(end, hi) if a < hi else a + 1
            blocks = [(a + 1, hi)]
            cursor = a + 1
        lines = list(hunk.lines)
        separator = 0
        if sw["trailing_blank_separator"]:
            k = len(lines)
            while k and k - 1 in hunk.blank:
                k -= 1
            if not hunk.eof and 0 < k < len(lines) and all(kind == "+" for kind, _ in lines[:k]):
                lines, separator = lines[:k], len(lines) - k
        old = [t for kind, t in lines if kind != "+"]
        if not old:
            at = cursor if sw["anchored_insert"] and hunk.anchors and not hunk.eof else n
            if separator:
                # Read as empty context lines, the blanks would put the lines elsewhere: refused.
                found = _seek(bodies, [""] * separator, cursor, False, sw)
                if sw["ambiguous"]:
                    found = [p for p in found if any(lo <= p < hi for lo, hi in blocks)] or found
                if found and found != [at]:
                    raise OracleError(f"blank lines read two ways: at {at} or before {found}")
            edits.append((at, at, lines))
            continue
        found = _seek(bodies, old, cursor, hunk.eof, sw)
        if not found and old[-1] == "":
            lines = _drop_last_empty(lines)
            old = [t for kind, t in lines if kind != "+"]
            if not old:
                at = n if sw["eof_addition_at_end"] and hunk.eof else cursor
                edits.append((at, at, lines))
                continue
            found = _seek(bodies, old, cursor, hunk.eof, sw)
        if not found:
            raise OracleError(f"expected lines not found: {old!r}")
        if sw["ambiguous"]:
            found = [p for p in found if any(lo <= p < hi for lo, hi in blocks)] or found
        any_place = hunk.eof or all(kind == " " for kind, _ in lines)
        pending.append((len(edits), found, len(old), any_place))
        edits.append((found[0], found[0] + len(old), lines))
        cursor = found[0] + len(old)
    if sw["ambiguous"]:
        # The hunks' order: each after the one before, and leaving room for those after it.
        bounds = []
        limit = n
        for _, found, m, _ in reversed(pending):
            bounds.append(limit)
            fits = [p for p in found if p + m <= limit]
            limit = fits[-1] if fits else found[0]
        earliest = 0
        for (k, found, m, any_place), bound in zip(pending, reversed(bounds), strict=True):
            places = [p for p in found if p >= earliest and p + m <= bound] or found[:1]
            if len(places) > 1 and not any_place:
                raise OracleError(f"ambiguous: at {places}")
            edits[k] = (places[0], places[0] + m, edits[k][2])
            earliest = places[0] + m
    if chosen is not None:
        chosen.extend(start for start, _, _ in edits)
    newline = _dominant(ends) if sw["dominant_ending"] else (ends[0] if n and ends[0] else "\n")
    out_bodies, out_ends = _render_runs(bodies, ends, edits, newline)
    last = len(out_ends) - 1
    for k, end in enumerate(out_ends):
        if not end and (k < last or not sw["keep_missing_newline"]):
            out_ends[k] = newline
    body = "".join(b + e for b, e in zip(out_bodies, out_ends, strict=True))
    return ((BOM if bom else "") + body).encode("utf-8")


Line = tuple[str, str]  # (body, ending)


def _render_runs(
    bodies: list[str], ends: list[str], edits: list, newline: str
) -> tuple[list[str], list[str]]:
    """Codex: each hunk is cut into runs of consecutive ``-``/``+`` lines (context lines are not
    written); the runs, stably sorted by position, are applied last to first, so runs at one
    position keep patch order."""
    runs: list[tuple[int, int, list[Line]]] = []
    for start, _stop, hunk_lines in edits:
        j, run = start, None
        for kind, text in hunk_lines:
            if kind == " ":
                if run is not None:
                    runs.append(run)
                    run = None
                j += 1
                continue
            if run is None:
                run = (j, 0, [])
            if kind == "-":
                run = (run[0], run[1] + 1, run[2])
                j += 1
            else:
                run[2].append((text, newline))
        if run is not None:
            runs.append(run)
    runs.sort(key=lambda r: r[0])
    lines: list[Line] = list(zip(bodies, ends, strict=True))
    for start, count, new in reversed(runs):
        lines[start : start + count] = new
    return [b for b, _ in lines], [e for _, e in lines]


def _is_dir(tree: Mapping[str, bytes], path: str) -> bool:
    return any(name.startswith(path + "/") for name in tree)


def oracle(
    tree: Mapping[str, bytes],
    patch_text: str,
    sw: Mapping[str, bool],
    chosen: dict[str, list[int]] | None = None,
) -> Result:
    """The result the model predicts for ``patch_text`` on ``tree`` under the switches ``sw``;
    ``chosen`` gets, per updated path, each hunk's place, in patch order."""
    try:
        ops = oracle_parse(patch_text, sw)
    except OracleError as exc:
        return Result(False, dict(tree), f"parse: {exc}")
    if sw["unique_paths"]:
        seen: set[str] = set()
        for op in ops:
            written = [op.path] if op.move_to is None else [op.path, op.move_to]
            if op.move_to == op.path or seen & set(written):
                return Result(False, dict(tree), f"duplicate path {op.path}")
            seen.update(written)
    out = dict(tree)
    for op in ops:
        try:
            if op.kind == "add":
                if sw["no_overwrite"] and op.path in tree:
                    raise OracleError(f"cannot add {op.path}: it already exists")
                if _is_dir(out, op.path):
                    raise OracleError(f"{op.path} is a directory")
                out[op.path] = op.content.encode("utf-8")
            elif op.kind == "delete":
                if op.path not in out:
                    raise OracleError(f"cannot delete {op.path}")
                del out[op.path]
            else:
                if op.path not in out:
                    raise OracleError(f"cannot read {op.path}")
                data = out[op.path]
                if op.hunks:
                    places = None if chosen is None else chosen.setdefault(op.path, [])
                    data = oracle_update(data, op.hunks, sw, places)
                if op.move_to is None:
                    out[op.path] = data
                else:
                    if sw["no_overwrite"] and op.move_to in tree:
                        raise OracleError(f"cannot move onto {op.move_to}: it already exists")
                    if _is_dir(out, op.move_to):
                        raise OracleError(f"{op.move_to} is a directory")
                    out[op.move_to] = data
                    del out[op.path]
        except OracleError as exc:
            return Result(False, dict(tree) if sw["atomic"] else out, f"apply: {exc}")
    if sw["refuse_noop"] and out == dict(tree):
        return Result(False, dict(tree), "the patch changes nothing")
    return Result(True, out, "ok")


# ------------------------------------------------------------------------------------ generator

VOCABULARY = [
    "",
    "",
    "",
    "}",
    "def f():",
    "def g():",
    "    return x",
    "    return x  ",
    "    return y",
    "x = 1",
    "  x = 1",
    "x = 1 ",
    "x = 2",
    "# note",
    "pass",
    "    pass",
    "\tpass",
    "print(\u201chi\u201d)",
    'print("hi")',
    "it\u2019s done",
    "it's done",
    "a \u2014 b",
    "a - b",
    "x\u00a0=\u00a01",
    "wait\u2026",
    "\u2018q\u2019 \uff0d z",
    "*** note",
    "@@ x",
    "-dash",
    "+plus",
    "end",
]
# ASCII -> typographic spellings a model may write instead (and the other way round).
_TYPOGRAPHIC = {
    "-": "\u2013\u2014\u2011\u2212\ufe63\uff0d",
    "'": "\u2018\u2019\u201b\u2032\uff07",
    '"': "\u201c\u201d\u201e\u2033\uff02",
    " ": "\u00a0\u2002\u2009\u202f\u3000\u2000",
    "...": "\u2026",
}
PATHS = ["a.txt", "b.py", "src/c.py", "src/d.md", "e.txt"]
NEW_PATHS = ["new.txt", "src/new.py", "n/m.txt", "b2.py"]


def _random_file(rng: random.Random) -> bytes:
    count = rng.choice([0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 14])
    bodies = [rng.choice(VOCABULARY) for _ in range(count)]
    style = rng.choices(["lf", "crlf", "mixed", "cr"], [60, 18, 17, 5])[0]
    ends = []
    for _ in bodies:
        if style == "mixed":
            ends.append(
                rng.choice(["\n", "\r\n", "\n", "\r"] if rng.random() < 0.2 else ["\n", "\r\n"])
            )
        else:
            ends.append({"lf": "\n", "crlf": "\r\n", "cr": "\r"}[style])
    if ends and rng.random() < 0.18:
        ends[-1] = ""
    text = "".join(b + e for b, e in zip(bodies, ends, strict=True))
    if rng.random() < 0.08:
        text = BOM + text
    return text.encode("utf-8")


def _file_lines(data: bytes) -> list[str]:
    """The file's lines as a model sees them (no BOM, no endings)."""
    text = data.decode("utf-8").removeprefix(BOM)
    return [m.group(1) for m in _ENDING.finditer(text) if m.group(1) or m.group(2)]


def _typographic(rng: random.Random, line: str) -> str:
    """``line`` with its ASCII punctuation swapped for typographic characters, or back."""
    for ascii_text, fancy in _TYPOGRAPHIC.items():
        for char in fancy:
            if char in line and rng.random() < 0.7:
                line = line.replace(char, ascii_text)
    for ascii_text, fancy in _TYPOGRAPHIC.items():
        if ascii_text in line and rng.random() < 0.3:
            line = line.replace(ascii_text, rng.choice(fancy), 1)
    return line


def _fuzz(rng: random.Random, line: str) -> str:
    """A model's slightly wrong copy of a context line."""
    roll = rng.random()
    if roll < 0.25:
        return line.rstrip() if line != line.rstrip() else line + rng.choice([" ", "  ", "\t"])
    if roll < 0.45:
        return line.lstrip() if line != line.lstrip() else "  " + line
    if roll < 0.9:
        return _typographic(rng, line)
    return line.strip() + " "


def _added_line(rng: random.Random) -> str:
    return rng.choice(
        ["NEW", "new()", "    added = 1", "", "x = 3", "caf\u00e9 \u2014 ok", "\treturn z", "}"]
    )


def _gen_hunk(
    rng: random.Random, lines: list[str], pos: int, broken: bool
) -> tuple[list[str], int, int | None] | None:
    """One hunk's text lines (``@@`` header included) starting at or after ``pos``, the new
    ``pos``, and the line the hunk was made for (its old lines' first, or where an addition
    goes)."""
    n = len(lines)
    kind = rng.choices(["change", "pure", "eof"], [75, 12, 13])[0]
    header: list[str] = []
    body: list[tuple[str, str]] = []
    eof = False
    meant: int | None = None
    if kind == "pure" or n == 0:
        body = [("+", _added_line(rng)) for _ in range(rng.randint(1, 3))]
        meant = n
        if pos < n and rng.random() < 0.5:
            anchor_at = rng.randrange(pos, n)
            header.append("@@ " + lines[anchor_at])
            pos = meant = anchor_at + 1
        eof = rng.random() < 0.3
        meant = n if eof else meant
    else:
        if kind == "eof":
            size = rng.randint(1, min(4, n))
            start, stop = n - size, n
            eof = True
        else:
            if pos >= n:
                return None
            start = rng.randrange(pos, n)
            stop = min(n, start + rng.randint(1, 4))
        if start < pos:
            return None
        meant = start
        region = list(range(start, stop))
        removed = set(rng.sample(region, rng.randint(0, len(region))))
        if removed and rng.random() < 0.3:
            # Keep the removed lines contiguous, as models usually write them.
            first = min(removed)
            removed = set(range(first, first + len(removed))) & set(region)
        adds_at = rng.choice([*region, stop]) if rng.random() < 0.8 or not removed else None
        for k in region:
            if k == adds_at:
                body += [("+", _added_line(rng)) for _ in range(rng.randint(1, 2))]
            text = lines[k]
            fuzz_rate = 0.06 if k in removed else 0.18
            if rng.random() < fuzz_rate:
                text = _fuzz(rng, text)
            body.append(("-" if k in removed else " ", text))
        if adds_at == stop:
            body += [("+", _added_line(rng)) for _ in range(rng.randint(1, 2))]
        if broken and body:
            k = rng.randrange(len(body))
            if body[k][0] != "+":
                body[k] = (body[k][0], "missing " + body[k][1])
        if start > pos and rng.random() < 0.3:
            anchor_at = rng.randrange(pos, start)
            anchor = lines[anchor_at]
            if rng.random() < 0.2:
                anchor = _fuzz(rng, anchor)
            header.append("@@ " + anchor if anchor else "@@")
            if rng.random() < 0.08 and anchor_at + 1 < start:
                header.append("@@ " + lines[rng.randrange(anchor_at + 1, start)])
        pos = stop
    if rng.random() < 0.08:
        body += [(" ", "")] * rng.randint(1, 2)  # a blank separator line (or two) after the hunk
    if not header and rng.random() < 0.8:
        header = ["@@"]
    out = header + [
        ("" if not text and kind == " " and rng.random() < 0.5 else kind + text)
        for kind, text in body
    ]
    if eof:
        out.append(("  " if rng.random() < 0.05 else "") + EOF_MARKER)
    return out, pos, meant


def _header(rng: random.Random, marker: str, path: str) -> str:
    return ("  " if rng.random() < 0.07 else "") + marker + path


def _gen_update(
    rng: random.Random,
    tree: Tree,
    path: str,
    move_to: str | None,
    meant: list[int] | None = None,
) -> list[str]:
    out = [_header(rng, UPDATE, path)]
    if move_to is not None:
        out.append(("  " if rng.random() < 0.05 else "") + MOVE + move_to)
    lines = _file_lines(tree[path]) if path in tree else ["x = 1"]
    roll = rng.random()
    if move_to is not None and roll < 0.3:
        return out  # a bare rename
    if move_to is not None and roll < 0.55 and lines:
        k = rng.randrange(len(lines))
        return [*out, "@@", *(" " + line for line in lines[k : k + rng.randint(1, 2)])]
    if move_to is None and roll < 0.03 and lines:
        return [*out, "@@", " " + lines[0]]  # context only, no move
    pos = 0
    hunks: list[list[str]] = []
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        made = _gen_hunk(rng, lines, pos, broken=rng.random() < 0.05)
        if made is None:
            break
        hunk, pos, start = made
        hunks.append(hunk)
        if meant is not None and start is not None:
            meant.append(start)
    if not hunks:
        hunks.append(["@@", "+" + _added_line(rng)])
        if meant is not None:
            meant.append(len(lines))
    if hunks[0][0] == "@@" and rng.random() < 0.25:
        hunks[0] = hunks[0][1:]  # the first hunk without its bare @@
    for hunk in hunks:
        if hunk and not hunk[0].startswith("@@") and hunk is not hunks[0]:
            hunk.insert(0, "@@")
        out += hunk
    return out


def generate(seed: int) -> tuple[Tree, str]:
    """The case for ``seed``: an input tree and a patch text."""
    tree, text, _ = generate_meant(seed)
    return tree, text


def generate_meant(seed: int) -> tuple[Tree, str, dict[str, list[int]]]:
    """:func:`generate`, and per updated path the line each hunk's old lines were taken from."""
    meant: dict[str, list[int]] = {}
    rng = random.Random(seed)
    tree: Tree = {}
    for path in rng.sample(PATHS, rng.randint(1, 3)):
        tree[path] = _random_file(rng)
    existing = list(tree)
    ops: list[list[str]] = []
    used: set[str] = set()
    for _ in range(rng.choice([1, 1, 1, 2, 2, 3])):
        free = [p for p in existing if p not in used] or existing
        path = rng.choice(free)
        if rng.random() < 0.03:
            path = rng.choice(existing)  # maybe a duplicate
        kind = rng.choices(
            ["update", "delete", "add", "add-existing", "move", "update-missing"],
            [58, 8, 12, 3, 16, 3],
        )[0]
        if kind == "update":
            ops.append(_gen_update(rng, tree, path, None, meant.setdefault(path, [])))
        elif kind == "delete":
            ops.append([_header(rng, DELETE, path)])
        elif kind in ("add", "add-existing"):
            path = rng.choice(NEW_PATHS) if kind == "add" else path
            body = ["+" + _added_line(rng) for _ in range(rng.randint(0, 3))]
            ops.append([_header(rng, ADD, path), *body])
        elif kind == "move":
            target = path if rng.random() < 0.04 else rng.choice(NEW_PATHS + existing)
            ops.append(_gen_update(rng, tree, path, target, meant.setdefault(path, [])))
        else:
            ops.append(_gen_update(rng, tree, "missing.txt", None))
        used.add(path)
    lines = ["*** Begin Patch"]
    for op in ops:
        if rng.random() < 0.03:
            lines.append("")  # a blank line between operations
        lines += op
    lines.append("*** End Patch")
    roll = rng.random()
    if roll < 0.02:
        lines.insert(1, "*** Frob File: a.txt")  # a bad header
    elif roll < 0.04:
        lines.pop()  # no End Patch
    if rng.random() < 0.08:
        lines[0] = "  " + lines[0] + " "
        lines[-1] = " " + lines[-1] + "  "
    if rng.random() < 0.12:
        opener = rng.choice(
            ["<<'EOF'", "<<EOF", '<<"EOF"', "apply_patch <<'EOF'", 'apply_patch <<"EOF"']
        )
        lines = [opener, *lines, "EOF"]
    text = "\n".join(lines) + ("\n" if rng.random() < 0.9 else "")
    if rng.random() < 0.08:
        text = text.replace("\n", "\r\n")
    return tree, text, meant


# ------------------------------------------------------------------------------------ a case


@dataclass
class Case:
    seed: int
    tree: Tree
    patch: str
    codex: Result
    applyonce: Result
    model_codex: Result
    model_applyonce: Result
    switches: tuple[str, ...] = ()  # the switches a difference is attributed to
    documented_only: bool = True  # the documented switches alone derive applyonce's result
    # applyonce refused the patch for its places (several, or two readings) where Codex applied
    # it and put every hunk where the patch's author took it from: a disagreement, not explained.
    codex_right: bool = False

    @property
    def verdict(self) -> str:
        """``agree``; ``explained`` (the tools differ, and the oracle with the documented switches
        on derives applyonce's result); ``finding`` (only with a ``PENDING`` switch on as well);
        ``refused-codex-right`` (applyonce refused the places of hunks Codex put where they were
        meant); or ``unexplained``."""
        if not (self.model_codex.same(self.codex) and self.model_applyonce.same(self.applyonce)):
            return "unexplained"
        if self.codex_right:
            return "refused-codex-right"
        if self.codex.same(self.applyonce):
            return "agree"
        return "explained" if self.documented_only else "finding"

    def describe(self) -> str:
        parts = [f"seed {self.seed}: {self.verdict} {list(self.switches)}", "  tree:"]
        parts += [f"    {path}: {data!r}" for path, data in sorted(self.tree.items())]
        parts.append("  patch:")
        parts += ["    | " + line for line in self.patch.split("\n")]
        for name, result in (
            ("codex", self.codex),
            ("oracle, switches off", self.model_codex),
            ("applyonce", self.applyonce),
            ("oracle, switches on", self.model_applyonce),
        ):
            parts.append(f"  {name}:")
            parts.append(result.describe(self.tree))
        return "\n".join(parts)


def attribute(tree: Tree, patch_text: str, off: Result, on: Result) -> tuple[str, ...]:
    """The switches whose flip (from all-off, or from all-on) changes the oracle's result."""
    names = []
    for name in CODEX:
        if not oracle(tree, patch_text, {**CODEX, name: True}).same(off) or not oracle(
            tree, patch_text, {**APPLYONCE, name: False}
        ).same(on):
            names.append(name)
    return tuple(names)


def run_case(seed: int, *, binary: str, workdir: Path) -> Case:
    tree, patch_text, meant = generate_meant(seed)
    return check_case(seed, tree, patch_text, binary=binary, workdir=workdir, meant=meant)


def check_case(
    seed: int,
    tree: Tree,
    patch_text: str,
    *,
    binary: str,
    workdir: Path,
    meant: dict[str, list[int]] | None = None,
) -> Case:
    """One case; ``meant`` (per path, the line each hunk was taken from) lets a refusal where Codex
    put every hunk where it was meant count as a disagreement."""
    codex = run_codex(binary, tree, patch_text, workdir=workdir)
    ours = run_applyonce(tree, patch_text)
    case = Case(
        seed,
        tree,
        patch_text,
        codex,
        ours,
        oracle(tree, patch_text, CODEX),
        oracle(tree, patch_text, APPLYONCE),
    )
    if meant is not None and codex.ok and not ours.ok and ours.message.startswith(REFUSED_PLACES):
        chosen: dict[str, list[int]] = {}
        oracle(tree, patch_text, CODEX, chosen)
        case = replace(case, codex_right=chosen == {p: m for p, m in meant.items() if p in chosen})
    if not codex.same(ours) or case.verdict != "agree":
        documented = oracle(tree, patch_text, {**APPLYONCE, **dict.fromkeys(PENDING, False)})
        case = replace(
            case,
            switches=attribute(tree, patch_text, case.model_codex, case.model_applyonce),
            documented_only=documented.same(ours),
        )
    return case
