"""Git's own metadata files in a patch, checked by the rules of ``git fsck --strict``. Pure.

Every commit applyonce makes must pass ``git fsck --strict`` (docs/design.md §2). The tree names are
checked in :mod:`applyonce.core.paths`; here, the *contents* fsck judges: a ``.gitmodules`` (in
any folder, in any spelling HFS+ or NTFS folds to it) must parse as a Git config file, and its
submodules must have

* a name that is not empty, has no ``..`` component and is not absolute (``gitmodulesName``;
  git's ``check_submodule_name``; the absolute rule is applyonce's own);
* a ``url`` git's ``check_submodule_url`` accepts: not an option (``-…``), no newline once
  %-decoded in a relative or ``git://`` URL, no ``../`` climbing out into a host, and an
  ``http(s)``/``ftp(s)`` URL with a host and no newline in any part (``gitmodulesUrl``);
* a ``path`` that is not an option (``gitmodulesPath``);
* no ``update = !command`` (``gitmodulesUpdate``);

and a ``.gitattributes`` has no line of 2048 bytes or more (``gitattributesLineLength``).
``.gitmodules``, ``.gitattributes``, ``.gitignore`` and ``.mailmap`` may not be symlinks
(``gitmodulesSymlink``, …). A ``.gitmodules`` over 1 MiB is refused too (``gitmodulesLarge``:
git gives up on one it cannot load; applyonce's bound is lower, and says so).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NoReturn
from urllib.parse import unquote_to_bytes

from applyonce.errors import ApplyOnceError

MODE_LINK = 0o120000
MAX_GITMODULES_BYTES = 1 << 20
ATTR_MAX_LINE_LENGTH = 2048  # git's attr.h: longer lines are not parsed, and fsck refuses them

# Code points HFS+ ignores in names (as git's is_hfs_dot_generic skips them).
_IGNORABLE = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)
# (name without its dot, the NTFS 8.3 fallback short-name prefix) as git's path.c spells them.
_DOTFILES = {
    "gitmodules": "gi7eba",
    "gitattributes": "gi7d29",
    "gitignore": "gi250a",
    "mailmap": "maba30",
}


class GitMetadataError(ApplyOnceError):
    """A patch writes a Git metadata file that ``git fsck --strict`` would refuse."""

    kind = "git-metadata"
    default_hint = "fix the file in the patch so that 'git fsck --strict' accepts it"


def _ntfs_tail_ok(rest: str) -> bool:
    """Only spaces and periods until the end or an NTFS stream (``:``)."""
    return rest.split(":", 1)[0].strip(" .") == ""


def _is_ntfs_dotfile(name: str, dotless: str, short_prefix: str) -> bool:
    """git's ``is_ntfs_dot_generic``: ``.gitmodules ``, ``GITMOD~1``, ``gi7eba~1``, …"""
    lowered = name.lower()
    if lowered.startswith("." + dotless):
        return _ntfs_tail_ok(name[len(dotless) + 1 :])
    if (
        lowered.startswith(dotless[:6])
        and len(name) >= 8
        and name[6] == "~"
        and "1" <= name[7] <= "4"
    ):
        return _ntfs_tail_ok(name[8:])
    # The fallback short name: up to 6 characters of the hash prefix, "~", digits (8 in all).
    match = re.match(r"([^~]{0,6})~([1-9][0-9]*)", name[:8])
    if match is None or match.end() != 8 or not match.group(1).isascii():
        return False
    if match.group(1).lower() != short_prefix[: len(match.group(1))]:
        return False
    return _ntfs_tail_ok(name[8:])


def dotfile_kind(name: str) -> str | None:
    """Which of git's dotfiles (``gitmodules``, ``gitattributes``, ``gitignore``, ``mailmap``)
    the tree entry ``name`` is on some file system, if any."""
    hfs = name.translate(_IGNORABLE).lower()
    for dotless, short_prefix in _DOTFILES.items():
        if hfs == "." + dotless or _is_ntfs_dotfile(name, dotless, short_prefix):
            return dotless
    return None


def check_git_metadata(changes: Iterable[tuple[str, bytes | None, int]]) -> None:
    """Refuse written files that would make the commit fail ``git fsck --strict``.

    Args:
        changes: ``(path, content, git mode)`` of every path written (content None: deleted).

    Raises:
        GitMetadataError: the message names the fsck rule (``gitmodulesUrl``, …).
    """
    for path, content, mode in changes:
        if content is None:
            continue
        kind = dotfile_kind(path.rsplit("/", 1)[-1])
        if kind is None:
            continue
        if mode == MODE_LINK:
            _refuse(path, f"{kind}Symlink", "is a symbolic link")
        if kind == "gitmodules":
            _check_gitmodules(path, content)
        elif kind == "gitattributes":
            for number, line in enumerate(content.split(b"\n"), start=1):
                if len(line) >= ATTR_MAX_LINE_LENGTH:
                    what = f"line {number} is {len(line)} bytes long (git reads up to 2047)"
                    _refuse(path, "gitattributesLineLength", what)


def _refuse(path: str, rule: str, what: str) -> NoReturn:
    raise GitMetadataError(f"{path}: {what} (git fsck: {rule})", path=path, rule=rule)


def _check_gitmodules(path: str, content: bytes) -> None:
    if len(content) > MAX_GITMODULES_BYTES:
        _refuse(path, "gitmodulesLarge", f"is {len(content)} bytes, over 1 MiB")
    try:
        entries = parse_config(content.decode("utf-8", "surrogateescape"))
    except ConfigParseError as exc:
        _refuse(path, "gitmodulesParse", f"is not a valid Git config file ({exc})")
    for key, value in entries:
        section, _, rest = key.partition(".")
        if section != "submodule" or "." not in rest:
            continue
        name, _, variable = rest.rpartition(".")
        shown = repr(name[:80])
        if not check_submodule_name(name):
            _refuse(path, "gitmodulesName", f"submodule name {shown} is empty, absolute or has ..")
        if value is None:
            continue
        if variable == "url" and not check_submodule_url(value):
            _refuse(path, "gitmodulesUrl", f"submodule {shown} has a disallowed url {value[:80]!r}")
        if variable == "path" and value.startswith("-"):
            _refuse(path, "gitmodulesPath", f"submodule {shown} path {value[:80]!r} starts with -")
        if variable == "update" and value.startswith("!"):
            _refuse(path, "gitmodulesUpdate", f"submodule {shown} update runs a command")


# --- git's submodule name and URL rules ----------------------------------------------------------


def check_submodule_name(name: str) -> bool:
    """git's ``check_submodule_name`` (not empty, no ``..`` component with ``/`` or ``\\``
    separators), plus: not absolute."""
    if not name or name[0] in "/\\":
        return False
    return ".." not in re.split(r"[/\\]", name)


def _dot_slash(url: str) -> bool:
    return url[:2] in ("./", ".\\")


def _dot_dot_slash(url: str) -> bool:
    return url[:3] in ("../", "..\\")


def check_submodule_url(url: str) -> bool:
    """git's ``check_submodule_url``: whether git would let ``url`` be used for a submodule."""
    if url.startswith("-"):
        return False
    if _dot_slash(url) or _dot_dot_slash(url) or url.startswith("git://"):
        if b"\n" in unquote_to_bytes(url):
            return False
        rest, climbs = url, 0
        while _dot_slash(rest) or _dot_dot_slash(rest):
            climbs += _dot_dot_slash(rest)
            rest = rest[3:] if _dot_dot_slash(rest) else rest[2:]
        return not (climbs > 0 and rest[:1] in (":", "/"))
    curl_url = _curl_url(url)
    if curl_url is None:
        return True
    return _credential_url_ok(curl_url)


def _curl_url(url: str) -> str | None:
    """The URL git-remote-curl would get (None: not one of its schemes)."""
    for helper in ("http::", "https::", "ftp::", "ftps::"):
        if url.startswith(helper):
            return url[len(helper) :]
    if url.startswith(("http://", "https://", "ftp://", "ftps://")):
        return url
    return None


def _credential_url_ok(url: str) -> bool:
    """git's ``credential_from_url_gently`` succeeds and finds a host."""
    proto_end = url.find("://")
    if proto_end <= 0:
        return False
    cp = url[proto_end + 3 :]
    slash = len(cp)
    for i, ch in enumerate(cp):
        if ch in "/?#":
            slash = i
            break
    at = cp.find("@")
    colon = cp.find(":")
    parts = [url[:proto_end]]
    if at < 0 or slash <= at:
        host = cp[:slash]
    elif colon < 0 or at <= colon:
        parts.append(cp[:at])
        host = cp[at + 1 : slash]
    else:
        parts += [cp[:colon], cp[colon + 1 : at]]
        host = cp[at + 1 : slash]
    parts += [host, cp[slash:].lstrip("/")]
    decoded = [unquote_to_bytes(part) for part in parts]
    # A newline (or, in newer git, a carriage return) would end the credential helper's line.
    if any(b"\n" in part or b"\r" in part for part in decoded):
        return False
    return decoded[-2] != b""


# --- git's config file grammar (config.c), enough to read .gitmodules as git does ---------------


class ConfigParseError(ValueError):
    """The text is not a Git config file."""


ConfigFail = Callable[[str], ConfigParseError]
_SPACE = " \t\r\v\f"  # C's isspace, which git's parser uses


_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "\\": "\\", '"': '"'}


def parse_config(text: str) -> list[tuple[str, str | None]]:
    """``(section[.subsection].key, value)`` pairs in file order; a key without ``=`` has the
    value None (boolean true), as git reads them.

    Raises:
        ConfigParseError: git's parser would refuse the text (with the line number).
    """
    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    entries: list[tuple[str, str | None]] = []
    section: str | None = None
    pos, line = 0, 1
    n = len(text)

    def fail(why: str) -> ConfigParseError:
        return ConfigParseError(f"line {line}: {why}")

    while pos < n:
        ch = text[pos]
        if ch == "\n":
            line += 1
            pos += 1
        elif ch in _SPACE:
            pos += 1
        elif ch in "#;":
            end = text.find("\n", pos)
            pos = n if end < 0 else end
        elif ch == "[":
            section, pos = _section_header(text, pos + 1, fail)
        elif ch.isascii() and ch.isalpha():
            if section is None:
                raise fail("a key outside any section")
            start = pos
            while pos < n and text[pos].isascii() and (text[pos].isalnum() or text[pos] == "-"):
                pos += 1
            key = f"{section}.{text[start:pos].lower()}"
            while pos < n and text[pos] in " \t":
                pos += 1
            if pos >= n or text[pos] == "\n":
                entries.append((key, None))
                continue
            if text[pos] != "=":
                raise fail(f"'{key}' is not followed by '='")
            value, pos, lines = _value(text, pos + 1, fail)
            line += lines
            entries.append((key, value))
        else:
            raise fail(f"unexpected {ch!r}")
    return entries


def _section_header(text: str, pos: int, fail: ConfigFail) -> tuple[str, int]:
    n = len(text)
    start = pos
    while pos < n and text[pos] != "]":
        ch = text[pos]
        if ch in _SPACE:
            name = text[start:pos].lower()
            while pos < n and text[pos] in _SPACE:
                if text[pos] == "\n":
                    raise fail("an unterminated section header")
                pos += 1
            if pos >= n or text[pos] != '"':
                raise fail("a section's subsection is not quoted")
            pos += 1
            sub: list[str] = []
            while True:
                if pos >= n or text[pos] == "\n":
                    raise fail("an unterminated subsection name")
                ch = text[pos]
                if ch == '"':
                    break
                if ch == "\\":
                    pos += 1
                    if pos >= n or text[pos] == "\n":
                        raise fail("an unterminated subsection name")
                    ch = text[pos]
                sub.append(ch)
                pos += 1
            if pos + 1 >= n or text[pos + 1] != "]":
                raise fail("a subsection is not followed by ']'")
            if not name:
                raise fail("an empty section name")
            return f"{name}.{''.join(sub)}", pos + 2
        if not (ch.isascii() and (ch.isalnum() or ch in "-.")):
            raise fail(f"{ch!r} in a section name")
        pos += 1
    if pos >= n or pos == start:
        raise fail("a section header without ']'" if pos >= n else "an empty section name")
    return text[start:pos].lower(), pos + 1


def _value(text: str, pos: int, fail: ConfigFail) -> tuple[str, int, int]:
    """The value after ``=``, git's way: quotes, escapes, comments, continuation lines."""
    n = len(text)
    out: list[str] = []
    quoted = False
    space = 0  # whitespace seen outside quotes, kept only if more value follows
    lines = 0
    while True:
        if pos >= n or text[pos] == "\n":
            if quoted:
                raise fail("an unterminated quote")
            return "".join(out), pos, lines
        ch = text[pos]
        pos += 1
        if not quoted and ch in _SPACE:
            if out:
                space += 1
            continue
        if not quoted and ch in "#;":
            end = text.find("\n", pos)
            pos = n if end < 0 else end
            continue
        if space:
            out.append(" " * space)
            space = 0
        if ch == "\\":
            if pos >= n:
                continue  # git reads the end of the file as a newline: a continuation
            nxt = text[pos]
            pos += 1
            if nxt == "\n":
                lines += 1
                continue
            if nxt not in _ESCAPES:
                raise fail(f"an unknown escape '\\{nxt}'")
            out.append(_ESCAPES[nxt])
            continue
        if ch == '"':
            quoted = not quoted
            continue
        out.append(ch)
