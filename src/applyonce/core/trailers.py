"""A commit message's trailers, read as ``git log --format='%(trailers)'`` reads them.

Audit and recovery find calls by their ``Call-Id`` trailer, so they must see exactly the trailers
git shows: a commit that ``git log --format='%(trailers:key=Call-Id)'`` lists with a Call-Id is one
applyonce checks. libgit2's parser (``pygit2.Commit.message_trailers``) stops at a ``---`` line, as
``git interpret-trailers`` does for an email patch; ``%(trailers)`` does not (git's pretty.c asks
trailer.c for ``no_divider``), so a trailer block after a ``---`` line would be hidden from
applyonce but shown by git. This module follows git's rules (trailer.c, commit.c, pretty.c of
git 2.39):

* the message starts after its leading blank lines; a NUL byte ends it;
* the end: a scissors line (``# ------------------------ >8 ------------------------``) cuts the
  rest; trailing comment lines, empty lines and an old ``Conflicts:`` block are not part of it;
* the first paragraph (comment lines skipped) is the title and never holds trailers;
* the trailer block is the last paragraph, read from the end up to a blank line: it counts when
  all its lines are trailers (``Token: value``, the token letters, digits and ``-``, whitespace
  allowed before the ``:``), or when it has a git-generated line (``Signed-off-by: ``,
  ``(cherry picked from commit ``) and at least 25% trailer lines; comment lines are skipped and a
  line starting with whitespace continues the trailer before it;
* token and value are trimmed of whitespace; a continued value is unfolded to single spaces;
  ``key`` lookups ignore case, as ``%(trailers:key=…)`` does.

Not followed: ``trailer.*`` configuration (configured tokens and separators), and commit
messages in an encoding other than UTF-8 (read as UTF-8).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

_SPACE = b" \t\n\r"  # git's isspace(): its own ctype table, ASCII only
_FOLD = re.compile(rb"\n[ \t\n\r]*")
_SEPARATOR = re.compile(rb"(?:[A-Za-z0-9-]+[ \t]*)?:")
_GIT_GENERATED = (b"Signed-off-by: ", b"(cherry picked from commit ")
_CUT_LINE = b" ------------------------ >8 ------------------------\n"


class Trailers(Mapping[str, str]):
    """The trailers of one message, in order. As a mapping: the first value of each token,
    looked up without regard to case (``get("call-id")`` finds ``Call-Id``)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        self.pairs = pairs
        self._first: dict[str, str] = {}
        self._spelling: dict[str, str] = {}
        # Every non-empty value of each token (lowered), in order: audit asks each commit's
        # trailers for their Call-Ids several times.
        self._all: dict[str, list[str]] = {}
        for token, value in pairs:
            lowered = token.lower()
            self._first.setdefault(lowered, value)
            self._spelling.setdefault(lowered, token)
            if value:
                self._all.setdefault(lowered, []).append(value)

    def __getitem__(self, key: str) -> str:
        return self._first[key.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._spelling.values())

    def __len__(self) -> int:
        return len(self._first)

    def all(self, key: str) -> list[str]:
        """Every non-empty value of ``key``, in order (a message may repeat a token; an empty
        value names nothing)."""
        return list(self._all.get(key.lower(), ()))


# A message in the shape applyonce writes: a title, a blank line before the last paragraph, and
# that paragraph all ``Token: value`` lines, ending the message with one newline.
_PLAIN_BLOCK = re.compile(rb"(?:[A-Za-z0-9-]+: [^\n]*\n)+")


def _plain_block(message: bytes, comment_char: bytes) -> list[bytes] | None:
    """The trailer lines of a message whose shape leaves git's rules nothing to decide (the
    last paragraph is all trailers, nothing to skip before or after it, no comment lines);
    None for any other message, which :func:`parse_trailers` reads by the rules."""
    if (
        message[:1] in (b"", b" ", b"\t", b"\n", b"\r", comment_char)
        or not message.endswith(b"\n")
        or message.endswith(b"\n\n")
        or b"\0" in message
        or b"\n" + comment_char in message
        or b"Conflicts:\n" in message
        or b"\r" in message
    ):
        return None
    at = message.rfind(b"\n\n")
    if at < 0 or _PLAIN_BLOCK.fullmatch(message, at + 2) is None:
        return None
    return message[at + 2 : -1].split(b"\n")


def parse_trailers(message: bytes, *, comment_char: bytes = b"#") -> Trailers:
    """The trailers ``git log --format='%(trailers:unfold)'`` shows for ``message``."""
    plain = _plain_block(message, comment_char)
    if plain is not None:
        found: list[tuple[str, str]] = []
        for line in plain:
            pos = line.index(b":")
            found.append(
                (
                    line[:pos].decode("utf-8", "replace"),
                    line[pos + 1 :].strip(_SPACE).decode("utf-8", "replace"),
                )
            )
        return Trailers(found)
    return _by_rules(message, comment_char)


def _by_rules(message: bytes, comment_char: bytes) -> Trailers:
    """:func:`parse_trailers` by git's rules, for any message."""
    buf = message.split(b"\0", 1)[0]
    # The message is split into lines once (audit parses ten thousand): every end below is a
    # line's start, so each step reads a run of these lines.
    lines = _lines(buf)
    first = next((i for i, (_, line) in enumerate(lines) if not _is_blank(line)), len(lines))
    skipped = lines[first][0] if first < len(lines) else len(buf)
    buf = buf[skipped:]
    lines = [(offset - skipped, line) for offset, line in lines[first:]]
    end = len(buf) - _ignore_non_trailer(buf, comment_char, lines)
    body = [item for item in lines if item[0] < end]
    start = _trailer_start(buf, end, comment_char, body)
    pairs: list[tuple[str, str]] = []
    strings: list[bytes] = []
    last: int | None = None
    for offset, line in body:
        if offset < start:
            continue
        if last is not None and line[:1] and line[0] in _SPACE:
            strings[last] += line
            continue
        strings.append(line)
        last = len(strings) - 1 if _separator(line) >= 1 else None
    for trailer in strings:
        pos = _separator(trailer)
        if pos >= 1:
            token = trailer[:pos].strip(_SPACE)
            value = _unfold(trailer[pos + 1 :].strip(_SPACE))
            pairs.append((token.decode("utf-8", "replace"), value.decode("utf-8", "replace")))
    return Trailers(pairs)


def _lines(buf: bytes) -> list[tuple[int, bytes]]:
    """``(offset, line with its newline)`` for each line of ``buf``: only ``\\n`` ends a line
    for git (``bytes.splitlines`` would also split at ``\\r``)."""
    found: list[tuple[int, bytes]] = []
    offset = 0
    parts = buf.split(b"\n")
    for part in parts[:-1]:
        found.append((offset, part + b"\n"))
        offset += len(part) + 1
    if parts[-1]:
        found.append((offset, parts[-1]))
    return found


def _is_blank(line: bytes) -> bool:
    return not line.strip(_SPACE)


def _ignore_non_trailer(
    buf: bytes, comment_char: bytes, lines: list[tuple[int, bytes]] | None = None
) -> int:
    """How many bytes at the end of ``buf`` are not the message (commit.c
    ``ignore_non_trailer``): after a scissors line, and the trailing run of comment lines,
    empty lines and an old ``Conflicts:`` block (``lines``: those of ``buf``, if known)."""
    cutoff = len(buf)
    scissors = b"\n" + comment_char + _CUT_LINE
    if buf.startswith(scissors[1:]):
        cutoff = 0
    elif (at := buf.find(scissors)) >= 0:
        cutoff = at + 1
    boc = 0
    in_conflicts = False
    for bol, line in _lines(buf) if lines is None else lines:
        if bol >= cutoff:
            break
        if line[:1] == comment_char or line[:1] == b"\n":
            if not boc:
                boc = bol
        elif line.startswith(b"Conflicts:\n"):
            in_conflicts = True
            if not boc:
                boc = bol
        elif in_conflicts and line[:1] == b"\t":
            pass
        elif boc:
            boc = 0
            in_conflicts = False
    return len(buf) - boc if boc else len(buf) - cutoff


def _separator(line: bytes) -> int:
    """trailer.c ``find_separator``: the offset of the ``:`` after a token (letters, digits,
    ``-``; then whitespace, but not first), or -1."""
    found = _SEPARATOR.match(line)
    return -1 if found is None else found.end() - 1


def _trailer_start(
    buf: bytes, end: int, comment_char: bytes, lines: list[tuple[int, bytes]] | None = None
) -> int:
    """trailer.c ``find_trailer_start``: where the trailer block of ``buf[:end]`` starts
    (``end`` when there is none; ``lines``: those of ``buf[:end]``, if known)."""
    if lines is None:
        lines = _lines(buf[:end])
    title_end = end
    for offset, line in lines:
        if line[:1] == comment_char:
            continue
        if _is_blank(line):
            title_end = offset
            break
    only_spaces = True
    recognized_prefix = False
    trailer_lines = non_trailer_lines = possible_continuation_lines = 0
    for offset, line in reversed(lines):
        if offset < title_end:
            break
        if line[:1] == comment_char:
            non_trailer_lines += possible_continuation_lines
            possible_continuation_lines = 0
            continue
        if _is_blank(line):
            if only_spaces:
                continue
            non_trailer_lines += possible_continuation_lines
            if recognized_prefix and trailer_lines * 3 >= non_trailer_lines:
                return offset + len(line)
            if trailer_lines and not non_trailer_lines:
                return offset + len(line)
            return end
        only_spaces = False
        if line.startswith(_GIT_GENERATED):
            trailer_lines += 1
            possible_continuation_lines = 0
            recognized_prefix = True
        elif _separator(line) >= 1 and line[0] not in _SPACE:
            trailer_lines += 1
            possible_continuation_lines = 0
        elif line[0] in _SPACE:
            possible_continuation_lines += 1
        else:
            non_trailer_lines += 1 + possible_continuation_lines
            possible_continuation_lines = 0
    return end


def _unfold(value: bytes) -> bytes:
    """trailer.c ``unfold_value``: each newline and the whitespace after it become one space."""
    if b"\n" not in value:
        return value.strip(_SPACE)
    return _FOLD.sub(b" ", value).strip(_SPACE)
