"""Git's glob matching (``wildmatch.c``), for the patterns of ``.gitignore`` and of a sparse
checkout: ``*`` and ``?`` (not across ``/`` when matching a path), ``**`` across folders where a
whole component, ``[...]`` classes (``!`` or ``^`` negates, ranges, ``[:alpha:]``…), ``\\``
escapes. A line-by-line port on bytes, so that a pattern matches here exactly where it matches in
git (ASCII classes, as git's own ``ctype``).
"""

from __future__ import annotations

from collections.abc import Callable

_MATCH = 0
_NOMATCH = 1
_ABORT_ALL = -1
_ABORT_TO_STARSTAR = -2

_STAR = ord("*")
_QUESTION = ord("?")
_BACKSLASH = ord("\\")
_SLASH = ord("/")
_OPEN = ord("[")
_CLOSE = ord("]")
_COLON = ord(":")
_DASH = ord("-")
_BANG = ord("!")
_CARET = ord("^")
_GLOB_SPECIAL = frozenset(b"*?[\\")

_PUNCT = frozenset(b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_CLASSES: dict[bytes, Callable[[int], bool]] = {
    b"alnum": lambda c: c < 0x80 and chr(c).isalnum(),
    b"alpha": lambda c: c < 0x80 and chr(c).isalpha(),
    b"blank": lambda c: c in (0x20, 0x09),
    b"cntrl": lambda c: c < 0x20 or c == 0x7F,
    b"digit": lambda c: 0x30 <= c <= 0x39,
    b"graph": lambda c: 0x21 <= c <= 0x7E,
    b"lower": lambda c: 0x61 <= c <= 0x7A,
    b"print": lambda c: 0x20 <= c <= 0x7E,
    b"punct": lambda c: c in _PUNCT,
    b"space": lambda c: c in b" \t\n\r",  # git's own ctype: no \v, \f
    b"upper": lambda c: 0x41 <= c <= 0x5A,
    b"xdigit": lambda c: chr(c) in "0123456789abcdefABCDEF",
}


def is_glob_special(char: int) -> bool:
    """Whether ``char`` (a byte) has a meaning in a glob: ``*``, ``?``, ``[``, ``\\``."""
    return char in _GLOB_SPECIAL


def literal_length(pattern: bytes) -> int:
    """How many bytes of ``pattern`` come before its first glob character (git's
    ``simple_length``)."""
    for i, char in enumerate(pattern):
        if char in _GLOB_SPECIAL:
            return i
    return len(pattern)


def wildmatch(
    pattern: bytes, text: bytes, *, pathname: bool = False, casefold: bool = False
) -> bool:
    """Whether ``text`` matches ``pattern`` as git's ``wildmatch`` says. ``pathname``
    (``WM_PATHNAME``): ``*``, ``?`` and classes never match ``/``; ``casefold``: ASCII letters
    match in either case (``core.ignoreCase``)."""
    return _Matcher(pattern, text, pathname, casefold).match(0, 0) == _MATCH


def _is_ascii_upper(char: int) -> bool:
    return 0x41 <= char <= 0x5A


def _is_ascii_lower(char: int) -> bool:
    return 0x61 <= char <= 0x7A


def _lower(char: int) -> int:
    return char + 0x20 if _is_ascii_upper(char) else char


class _Matcher:
    """``dowild`` of ``wildmatch.c``; positions past the end read as NUL, as in C."""

    def __init__(self, pattern: bytes, text: bytes, pathname: bool, casefold: bool) -> None:
        self.p = pattern
        self.t = text
        self.pathname = pathname
        self.casefold = casefold

    def _pc(self, i: int) -> int:
        return self.p[i] if i < len(self.p) else 0

    def _tc(self, i: int) -> int:
        return self.t[i] if i < len(self.t) else 0

    def match(self, pi: int, ti: int) -> int:
        casefold = self.casefold
        while (p_ch := self._pc(pi)) != 0:
            t_ch = self._tc(ti)
            if t_ch == 0 and p_ch != _STAR:
                return _ABORT_ALL
            if casefold:
                t_ch = _lower(t_ch)
                p_ch = _lower(p_ch)
            if p_ch == _BACKSLASH:
                # Literal match with the next byte (a trailing backslash matches nothing).
                pi += 1
                if t_ch != self._pc(pi):
                    return _NOMATCH
            elif p_ch == _QUESTION:
                if self.pathname and t_ch == _SLASH:
                    return _NOMATCH
            elif p_ch == _STAR:
                pi += 1
                if self._pc(pi) == _STAR:
                    prev = pi - 2
                    pi += 1
                    while self._pc(pi) == _STAR:
                        pi += 1
                    nxt = self._pc(pi)
                    if not self.pathname:
                        match_slash = True  # without WM_PATHNAME, '*' is '**'
                    elif (prev < 0 or self.p[prev] == _SLASH) and (
                        nxt in (0, _SLASH) or (nxt == _BACKSLASH and self._pc(pi + 1) == _SLASH)
                    ):
                        # "foo/**/bar" matches "foo/bar" too: "**/" may match nothing.
                        if nxt == _SLASH and self.match(pi + 1, ti) == _MATCH:
                            return _MATCH
                        match_slash = True
                    else:
                        match_slash = False
                else:
                    match_slash = not self.pathname  # without WM_PATHNAME, '*' is '**'
                nxt = self._pc(pi)
                if nxt == 0:
                    # A trailing "**" matches everything, a trailing "*" no more slash.
                    if not match_slash and _SLASH in self.t[ti:]:
                        return _NOMATCH
                    return _MATCH
                if not match_slash and nxt == _SLASH:
                    # One star then a slash: the rest of this component.
                    slash = self.t.find(b"/", ti)
                    if slash < 0:
                        return _NOMATCH
                    ti = slash  # the slashes are consumed below, as one
                else:
                    while True:
                        if t_ch == 0:
                            break
                        if not is_glob_special(nxt):
                            # A literal follows: skip to where it is (never past a slash that
                            # the star cannot match).
                            want = _lower(nxt) if casefold else nxt
                            while (t_ch := self._tc(ti)) != 0 and (match_slash or t_ch != _SLASH):
                                if casefold:
                                    t_ch = _lower(t_ch)
                                if t_ch == want:
                                    break
                                ti += 1
                            if t_ch != want:
                                return _NOMATCH
                        matched = self.match(pi, ti)
                        if matched != _NOMATCH:
                            if not match_slash or matched != _ABORT_TO_STARSTAR:
                                return matched
                        elif not match_slash and t_ch == _SLASH:
                            return _ABORT_TO_STARSTAR
                        ti += 1
                        t_ch = self._tc(ti)
                    return _ABORT_ALL
            elif p_ch == _OPEN:
                pi, matched_class = self._bracket(pi, t_ch)
                if matched_class is None:
                    return _ABORT_ALL
                if not matched_class or (self.pathname and t_ch == _SLASH):
                    return _NOMATCH
            elif t_ch != p_ch:
                return _NOMATCH
            ti += 1
            pi += 1
        return _NOMATCH if self._tc(ti) != 0 else _MATCH

    def _bracket(self, pi: int, t_ch: int) -> tuple[int, bool | None]:
        """The class opening at ``pi``: where it closes, and whether ``t_ch`` is in it (None: the
        pattern is malformed, which aborts the whole match)."""
        pi += 1
        p_ch = self._pc(pi)
        if p_ch == _CARET:
            p_ch = _BANG
        negated = p_ch == _BANG
        if negated:
            pi += 1
            p_ch = self._pc(pi)
        prev_ch = 0
        matched = False
        while True:  # do { … } while (prev_ch = p_ch, (p_ch = *++p) != ']')
            if not p_ch:
                return pi, None
            if p_ch == _BACKSLASH:
                pi += 1
                p_ch = self._pc(pi)
                if not p_ch:
                    return pi, None
                if t_ch == p_ch:
                    matched = True
            elif p_ch == _DASH and prev_ch and self._pc(pi + 1) and self._pc(pi + 1) != _CLOSE:
                pi += 1
                p_ch = self._pc(pi)
                if p_ch == _BACKSLASH:
                    pi += 1
                    p_ch = self._pc(pi)
                    if not p_ch:
                        return pi, None
                upper = t_ch - 0x20 if self.casefold and _is_ascii_lower(t_ch) else t_ch
                if prev_ch <= t_ch <= p_ch or prev_ch <= upper <= p_ch:
                    matched = True
                p_ch = 0  # so that prev_ch is 0: no range right after a range
            elif p_ch == _OPEN and self._pc(pi + 1) == _COLON:
                pi += 2
                start = pi
                while (p_ch := self._pc(pi)) and p_ch != _CLOSE:
                    pi += 1
                if not p_ch:
                    return pi, None
                length = pi - start - 1
                if length < 0 or self.p[pi - 1] != _COLON:
                    # No ":]": a plain '[' in the set.
                    pi = start - 2
                    p_ch = _OPEN
                    if t_ch == p_ch:
                        matched = True
                else:
                    name = self.p[start : start + length]
                    test = _CLASSES.get(name)
                    if test is None:
                        return pi, None  # a malformed [:class:]
                    # (Under casefold, t_ch is lower case already: "upper" takes it too.)
                    if test(t_ch) or (self.casefold and name == b"upper" and _is_ascii_lower(t_ch)):
                        matched = True
                    p_ch = 0
            elif t_ch == p_ch:
                matched = True
            prev_ch = p_ch
            pi += 1
            p_ch = self._pc(pi)
            if p_ch == _CLOSE:
                break
        return pi, matched != negated
