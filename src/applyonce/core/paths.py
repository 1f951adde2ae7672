"""Path safety for untrusted patch paths (docs/design.md §9).

Every path a patch names is checked and normalised here before anything is staged. The rules:

* no NUL byte and no control character (they break file systems, commit messages and terminals);
* not empty; no component longer than 255 bytes; no path longer than 4096 bytes, nor deeper than
  256 folders (a deeper one has no use, and the tree is built one level a frame);
* no ``..`` component, anywhere (even one that would stay inside the repo: patches have no reason
  to spell paths that way, and refusing is simpler to trust than resolving);
* an absolute path is accepted only inside the repository and becomes repo-relative;
* no ``.git`` component in any case (``.GIT``, ``.Git``), nor the spellings that file systems fold
  to it (``.git.``, ``.git ``, ``git~1``): the repository's own data is never a patch target;
* ``./a//b`` is normalised to ``a/b``.

Symlinked parents are refused too, but that needs the tree: see ``plan.py`` and ``gitstore.py``.
"""

from __future__ import annotations

import posixpath
import unicodedata

from applyonce.errors import ApplyOnceError

MAX_PATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255
MAX_DEPTH = 256  # folders above a file


class UnsafePathError(ApplyOnceError):
    """A patch names a path applyonce will not write."""

    kind = "unsafe-path"
    default_hint = "use a path relative to the repository root, inside it and outside .git"


# Code points HFS+ ignores in names (as git's own path checks do): ".\u200cgit" is ".git" there.
_IGNORABLE = dict.fromkeys(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)


def _is_git_dir_name(component: str) -> bool:
    # NTFS: "name:stream" names the file "name"; trailing dots and spaces are dropped.
    folded = component.translate(_IGNORABLE).split(":", 1)[0].casefold().rstrip(" .")
    return folded == ".git" or folded == "git~1"


def normalise_path(raw: str, *, repo_root: str | None = None) -> str:
    """Return the safe repo-relative form of ``raw``.

    Args:
        raw: the path as the patch spells it.
        repo_root: the work tree's absolute path, to accept absolute paths inside it.

    Raises:
        UnsafePathError: the path breaks one of the rules in the module docstring.
    """
    shown = repr(raw[:120])
    if "\x00" in raw:
        raise UnsafePathError(f"path {shown} contains a NUL byte", path=raw)
    # Category Cc: C0 (incl. TAB, LF), DEL and C1 (U+0080..U+009F: NEL, CSI, …).
    if any(unicodedata.category(ch) == "Cc" for ch in raw):
        raise UnsafePathError(f"path {shown} contains a control character", path=raw)
    if any(unicodedata.category(ch) == "Cs" for ch in raw):
        raise UnsafePathError(
            f"path {shown} is not UTF-8", path=raw, hint="name files in UTF-8 in the patch"
        )
    path = raw.strip()
    if not path:
        raise UnsafePathError("a path is empty", path=raw)
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        raise UnsafePathError(f"path {shown}… is longer than {MAX_PATH_BYTES} bytes", path=raw)
    if path.startswith("/"):
        root = posixpath.normpath(repo_root) if repo_root else None
        if (
            root is None
            or "/.." in path
            or not (path.startswith(root + "/") or posixpath.normpath(path) == root)
        ):
            raise UnsafePathError(f"absolute path {shown} is outside the repository", path=raw)
        path = path[len(root) + 1 :]
    components = [c for c in path.split("/") if c not in ("", ".")]
    if not components:
        raise UnsafePathError(f"path {shown} names the repository root, not a file", path=raw)
    if path.endswith("/"):
        raise UnsafePathError(f"path {shown} names a directory, not a file", path=raw)
    if len(components) > MAX_DEPTH + 1:
        raise UnsafePathError(
            f"path {shown}… is more than {MAX_DEPTH} folders deep",
            path=raw,
            hint="use a shallower path",
        )
    for component in components:
        if component == "..":
            raise UnsafePathError(f"path {shown} contains '..'", path=raw)
        if _is_git_dir_name(component):
            raise UnsafePathError(f"path {shown} is inside .git", path=raw)
        if len(component.encode("utf-8")) > MAX_COMPONENT_BYTES:
            raise UnsafePathError(
                f"path {shown} has a component longer than {MAX_COMPONENT_BYTES} bytes", path=raw
            )
    return "/".join(components)


def parents(path: str) -> list[str]:
    """``a/b/c`` -> ``["a", "a/b"]``."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def is_within(path: str, root: str) -> bool:
    """Whether the absolute, normalised ``path`` is ``root`` or below it (compared by whole
    components: ``/a/bc`` is not within ``/a/b``)."""
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root if root == "/" else root + "/")


def is_git_dir_name(component: str) -> bool:
    """Whether ``component`` names ``.git`` in any spelling a file system folds to it."""
    return _is_git_dir_name(component)
