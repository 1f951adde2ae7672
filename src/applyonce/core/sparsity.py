"""Which paths a sparse checkout holds: git's reading of ``$GIT_DIR/info/sparse-checkout``.

A path the patterns leave out gets an index entry with the skip-worktree bit and no file in the
work tree (``git ls-files -t`` shows ``S``); a path they include is checked out as usual. This is
what ``git merge``, ``git pull`` and ``git read-tree -mu`` decide for each path they write (git
2.39: ``unpack-trees.c``, ``dir.c``), in either mode:

* cone mode (``core.sparseCheckoutCone``, what ``git sparse-checkout set`` writes by default):
  the file lists folders (``/a/b/``) and their parents (``/a/`` then ``!/a/*/``). A path is
  included when it is at the root, when a listed folder is above it, or when it is directly in
  a parent of one. A file that is not in that form turns cone matching off (git warns
  "disabling cone pattern matching") and its lines are read as in non-cone mode;
* non-cone mode: the lines are ``.gitignore`` patterns (``!`` negates, a trailing ``/`` matches
  folders only, a pattern without a slash matches a name at any depth), the last one that
  matches decides, and a folder's decision holds for what is inside it unless a later pattern
  says otherwise for a path below.

Pure: the caller reads the file and the configuration (:mod:`applyonce.git.workfiles`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import Enum

from applyonce.core.wildmatch import is_glob_special, literal_length, wildmatch

_UTF8_BOM = b"\xef\xbb\xbf"


class _Match(Enum):
    """dir.c's ``enum pattern_match_result``."""

    UNDECIDED = -1
    NOT_MATCHED = 0
    MATCHED = 1
    MATCHED_RECURSIVE = 2


@dataclass(frozen=True)
class _Pattern:
    """One line, parsed as git's ``parse_path_pattern`` does."""

    text: bytes  # without the leading '!' and the trailing '/'
    negative: bool
    dirs_only: bool  # a trailing '/'
    any_depth: bool  # no '/' (but a trailing one): matched against a path's last name
    ends_with: bool  # '*' then a literal: matched by suffix
    literal: int  # how many bytes come before the first glob character

    @classmethod
    def parse(cls, line: bytes) -> _Pattern:
        negative = line.startswith(b"!")
        if negative:
            line = line[1:]
        dirs_only = line.endswith(b"/")
        if dirs_only:
            line = line[:-1]
        return cls(
            text=line,
            negative=negative,
            dirs_only=dirs_only,
            any_depth=b"/" not in line,
            ends_with=line.startswith(b"*") and literal_length(line[1:]) == len(line) - 1,
            literal=literal_length(line),
        )


@dataclass(frozen=True)
class _Cone:
    """The hash sets of cone mode: ``recursive`` folders (all below them included), ``parents``
    (their direct files included); ``everything``: ``/*`` without ``!/*/``."""

    recursive: frozenset[bytes]
    parents: frozenset[bytes]
    everything: bool


@dataclass(frozen=True)
class SparsePatterns:
    """The patterns of a sparse checkout, as git matches them (see the module's text)."""

    patterns: tuple[_Pattern, ...]
    cone: _Cone | None  # None: the patterns are matched as in non-cone mode
    ignore_case: bool = False

    @classmethod
    def parse(cls, text: bytes, *, cone: bool, ignore_case: bool = False) -> SparsePatterns:
        """The patterns of the sparse-checkout file ``text``. ``cone``:
        ``core.sparseCheckoutCone``; ``ignore_case``: ``core.ignoreCase``."""
        patterns = tuple(_Pattern.parse(line) for line in _lines(text))
        cones = _cone_of(patterns, ignore_case) if cone else None
        return cls(patterns, cones, ignore_case)

    def includes(self, path: str) -> bool:
        """Whether a file at ``path`` (repo-relative, ``/``-separated) is checked out: False
        means git gives it the skip-worktree bit and no file in the work tree."""
        name = path.encode("utf-8", "surrogateescape")
        # As unpack-trees.c's clear_ce_flags: each folder above the path, from the top, then
        # the path itself; a folder's decision is what an undecided path below it gets.
        decided = _Match.NOT_MATCHED
        parts = name.split(b"/")
        for depth in range(1, len(parts)):
            found = self._match(b"/".join(parts[:depth]), parts[depth - 1], is_dir=True)
            if self.cone is not None:
                if found is _Match.MATCHED_RECURSIVE:
                    return True
                if found is _Match.NOT_MATCHED:
                    return False
            if found is not _Match.UNDECIDED:
                decided = found
        found = self._match(name, parts[-1], is_dir=False)
        if found is _Match.UNDECIDED:
            found = decided
        return found in (_Match.MATCHED, _Match.MATCHED_RECURSIVE)

    def _match(self, path: bytes, basename: bytes, *, is_dir: bool) -> _Match:
        """dir.c's ``path_matches_pattern_list``."""
        cone = self.cone
        if cone is None:
            for pattern in reversed(self.patterns):
                if pattern.dirs_only and not is_dir:
                    continue
                if self._matches(pattern, path, basename):
                    return _Match.NOT_MATCHED if pattern.negative else _Match.MATCHED
            return _Match.UNDECIDED
        if cone.everything:
            return _Match.MATCHED
        key = self._key(b"/" + path)
        if key in cone.recursive:
            return _Match.MATCHED_RECURSIVE
        slash = key.rfind(b"/")
        if slash == 0:
            return _Match.MATCHED  # every file at the root
        if key[:slash] in cone.parents:
            return _Match.MATCHED
        while slash > 0:  # a listed folder above it
            if key[:slash] in cone.recursive:
                return _Match.MATCHED_RECURSIVE
            slash = key.rfind(b"/", 0, slash)
        return _Match.NOT_MATCHED

    def _key(self, path: bytes) -> bytes:
        return _fold(path) if self.ignore_case else path

    def _matches(self, pattern: _Pattern, path: bytes, basename: bytes) -> bool:
        """dir.c's ``match_basename`` / ``match_pathname`` (the sparse file's base is the
        root)."""
        fold = self.ignore_case
        text = pattern.text
        if pattern.any_depth:
            if pattern.literal == len(text):
                return _same(text, basename, fold)
            if pattern.ends_with:
                tail = text[1:]
                return len(tail) <= len(basename) and _same(
                    tail, basename[len(basename) - len(tail) :], fold
                )
            return wildmatch(text, basename, casefold=fold)
        literal = pattern.literal
        if text.startswith(b"/"):
            text = text[1:]
            literal -= 1
        if not path:
            return False
        name = path
        if literal:
            if literal > len(name) or not _same(text[:literal], name[:literal], fold):
                return False
            text, name = text[literal:], name[literal:]
            if not text and not name:
                return True
        return wildmatch(text, name, pathname=True, casefold=fold)


def _lines(text: bytes) -> list[bytes]:
    """The pattern lines of a sparse-checkout file, as ``add_patterns_from_buffer`` reads them:
    a UTF-8 BOM skipped, empty lines and ``#`` comments left out, a CR before the LF and the
    unescaped trailing spaces dropped."""
    if text.startswith(_UTF8_BOM):
        text = text[len(_UTF8_BOM) :]
    lines = []
    for raw in text.split(b"\n"):
        if not raw or raw.startswith(b"#"):
            continue
        line = raw[:-1] if raw.endswith(b"\r") else raw
        lines.append(_trim_trailing_spaces(line))
    return lines


def _trim_trailing_spaces(line: bytes) -> bytes:
    """dir.c's ``trim_trailing_spaces``: spaces at the end go, unless escaped by a backslash."""
    last_space: int | None = None
    i = 0
    while i < len(line):
        char = line[i]
        if char == 0x20:
            if last_space is None:
                last_space = i
        elif char == 0x5C:  # a backslash: the next byte is kept, whatever it is
            i += 1
            if i >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def _cone_of(patterns: tuple[_Pattern, ...], ignore_case: bool) -> _Cone | None:
    """dir.c's ``add_pattern_to_hashsets`` over all the lines; None: they are not in cone form
    (git then matches them as in non-cone mode)."""
    # A multiset, as git's hash map: a folder listed twice stays recursive after one
    # "!/folder/*/" line.
    recursive: Counter[bytes] = Counter()
    parents: set[bytes] = set()
    everything = False
    for pattern in patterns:
        text = pattern.text
        if pattern.negative and pattern.dirs_only and text == b"/*":
            everything = False
            continue
        plain = not (
            pattern.negative or pattern.dirs_only or pattern.any_depth or pattern.ends_with
        )
        if plain and text == b"/*":
            everything = True
            continue
        if len(text) < 2 or not text.startswith(b"/") or b"**" in text:
            return None
        if not pattern.dirs_only and text != b"/*":
            return None
        if not _only_escaped_globs(text):
            return None
        if len(text) > 2 and text.endswith(b"/*"):
            if not pattern.negative:
                return None
            folder = _unescape(text)
            if ignore_case:
                folder = _fold(folder)
            if recursive[folder] == 0:
                return None  # "!/a/*/" without "/a/" before it
            recursive[folder] -= 1
            parents.add(folder)
            continue
        if pattern.negative:
            return None
        folder = _unescape(text)
        if ignore_case:
            folder = _fold(folder)
        recursive[folder] += 1
        if folder in parents:
            return None  # the same folder listed twice
    return _Cone(frozenset(+recursive), frozenset(parents), everything)


def _only_escaped_globs(text: bytes) -> bool:
    """Whether every glob character of the cone pattern ``text`` is escaped (or is its trailing
    ``/*``)."""
    for i in range(1, len(text)):
        prev, cur = text[i - 1], text[i]
        nxt = text[i + 1] if i + 1 < len(text) else 0
        if not is_glob_special(cur) or prev == 0x5C:
            continue
        if cur == 0x5C and is_glob_special(nxt):
            continue
        if prev == 0x2F and cur == 0x2A and nxt == 0:
            continue
        return False
    return True


def _unescape(text: bytes) -> bytes:
    """dir.c's ``dup_and_filter_pattern``: backslashes dropped (each escaping the next byte),
    and a trailing ``/*`` cut."""
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == 0x5C:
            i += 1
            if i >= len(text):
                break
        out.append(text[i])
        i += 1
    if len(out) > 2 and out.endswith(b"/*"):
        del out[-2:]
    return bytes(out)


def _fold(text: bytes) -> bytes:
    """ASCII lower case (what git's ``fspathcmp`` compares under ``core.ignoreCase``)."""
    return text.lower()


def _same(a: bytes, b: bytes, fold: bool) -> bool:
    return _fold(a) == _fold(b) if fold else a == b
