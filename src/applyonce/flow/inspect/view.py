"""Read-only views of a branch's files, for an agent's ``view`` command: a file's bytes, or a
folder's listing.

Where the repository was opened at a work tree whose HEAD is the branch, a view reads that work
tree: it is what the agent's own shell would see, and what its edits are checked against (an
edit of a path with uncommitted changes is refused as dirty). Otherwise (a bare repository, or a
branch that is not checked out there) it reads the branch's tip.

Nothing is ever written. Paths are untrusted: they pass the rules a patch's paths pass
(:mod:`applyonce.core.paths`: no ``..``, nothing in ``.git``, absolute only inside the work tree),
and a symbolic link is never followed — in the work tree every component is opened relative to
its parent with ``O_NOFOLLOW``, so a link swapped in while we read cannot lead outside either.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from applyonce.core.paths import is_git_dir_name, normalise_path
from applyonce.errors import ApplyOnceError
from applyonce.flow.context import Context
from applyonce.git.store import GitTree

# A view reads the whole file: bounded, as everything an agent sends or asks for is.
VIEW_MAX_BYTES = 32 * 1024 * 1024
# A folder's listing goes this many levels down (the folder's own entries are level 1), and
# stops after this many entries.
LIST_DEPTH = 2
LIST_MAX_ENTRIES = 1000


class ViewError(ApplyOnceError):
    """A path cannot be viewed: it is not there, or is not a file or a folder."""

    kind = "view"
    default_hint = "view '.' to list the repository's files"


@dataclass(frozen=True)
class FileView:
    """A file's bytes. ``path`` is repo-relative; ``source`` says where it was read."""

    path: str
    data: bytes
    source: str


@dataclass(frozen=True)
class FolderView:
    """A folder's files and folders, ``LIST_DEPTH`` levels down, without ``.git``.

    ``entries`` are repo-relative paths, sorted; a folder ends with ``/``, a symbolic link with
    ``@``. ``left_out`` counts the entries past ``LIST_MAX_ENTRIES``.
    """

    path: str
    entries: tuple[str, ...]
    left_out: int
    source: str


def view(ctx: Context, raw_path: str, *, ref: str) -> FileView | FolderView:
    """What the agent sees at ``raw_path`` on ``ref``.

    Raises:
        UnsafePathError: the path breaks a rule of ``paths.py``.
        ViewError: nothing there, a link, a submodule, or a file over ``VIEW_MAX_BYTES``.
    """
    path = view_path(raw_path, repo_root=ctx.repo_root)
    workdir = ctx.store.workdir
    if workdir is not None and ctx.store.head_is(ref):
        return _from_worktree(workdir, path)
    tip = ctx.publisher.tip(ref)
    branch = ref.removeprefix("refs/heads/")
    source = f"{branch} at {tip[:12]}" if tip else f"{branch} (no commits yet)"
    return _from_tree(ctx.store.tree_at(tip), path, source)


def view_path(raw: str, *, repo_root: str | None) -> str:
    """The repo-relative form of a path to view (``""``: the repository's root).

    Unlike a patch's path, a view's may name the root (``.``, ``./``, the work tree's absolute
    path) or a folder with a trailing ``/``.
    """
    text = raw.strip()
    trimmed = text.rstrip("/")
    if trimmed in ("", ".") and not text.startswith("/"):
        return ""
    if repo_root is not None and trimmed == repo_root.rstrip("/"):
        return ""
    return normalise_path(trimmed or text, repo_root=repo_root)


def _shown(path: str) -> str:
    return path or "."


# --- the work tree -------------------------------------------------------------------------------

_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _from_worktree(root: Path, path: str) -> FileView | FolderView:
    source = f"the checkout at {root}"
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ViewError(f"cannot read the checkout at {root}: {exc.strerror}") from None
    try:
        for part in path.split("/") if path else []:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):  # a file where a folder should be
                raise ViewError(f"file not found: {path}", path=path)
            # O_NOFOLLOW: a link fails (ELOOP) instead of being followed. O_NONBLOCK: opening a
            # FIFO someone left in the tree must not hang the agent.
            try:
                child = os.open(part, _NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                raise _open_error(exc, path) from None
            os.close(fd)
            fd = child
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            entries, left_out = _bounded(_walk_fd(fd, path, LIST_DEPTH))
            return FolderView(path, entries, left_out, source)
        if not stat.S_ISREG(info.st_mode):
            raise ViewError(f"{path} is not a regular file", path=path)
        if info.st_size > VIEW_MAX_BYTES:
            raise _too_large(path, info.st_size)
        try:
            with os.fdopen(os.dup(fd), "rb") as stream:
                data = stream.read(VIEW_MAX_BYTES + 1)
        except OSError as exc:
            raise ViewError(f"cannot read {path}: {exc.strerror}", path=path) from None
        if len(data) > VIEW_MAX_BYTES:
            raise _too_large(path, len(data))
        return FileView(path, data, source)
    finally:
        os.close(fd)


def _open_error(exc: OSError, path: str) -> ViewError:
    if exc.errno == errno.ELOOP:
        return ViewError(
            f"{path} goes through a symbolic link, which a view does not follow",
            path=path,
            hint="view the path the link points to",
        )
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return ViewError(f"file not found: {path}", path=path)
    return ViewError(f"cannot read {path}: {exc.strerror}", path=path)


def _walk_fd(fd: int, prefix: str, depth: int) -> Iterator[str]:
    try:
        with os.scandir(fd) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
    except OSError:  # unreadable (permissions): listed by its parent, its contents not shown
        return
    for entry in entries:
        if is_git_dir_name(entry.name):
            continue
        rel = f"{prefix}/{entry.name}" if prefix else entry.name
        if entry.is_symlink():
            yield rel + "@"
        elif entry.is_dir(follow_symlinks=False):
            yield rel + "/"
            if depth > 1:
                try:
                    child = os.open(entry.name, _NOFOLLOW | os.O_DIRECTORY, dir_fd=fd)
                except OSError:
                    continue  # gone, or swapped for a link: listed, not entered
                try:
                    yield from _walk_fd(child, rel, depth - 1)
                finally:
                    os.close(child)
        else:
            yield rel


# --- a commit's tree -----------------------------------------------------------------------------


def _from_tree(tree: GitTree, path: str, source: str) -> FileView | FolderView:
    kind = "dir" if path == "" else tree.kind(path)
    if kind is None:
        raise ViewError(f"file not found: {path} ({source})", path=path)
    if kind == "dir":
        entries, left_out = _bounded(_walk_tree(tree, path, LIST_DEPTH))
        return FolderView(path, entries, left_out, source)
    if kind == "symlink":
        raise ViewError(
            f"{path} is a symbolic link, which a view does not follow",
            path=path,
            hint="view the path the link points to",
        )
    if kind == "submodule":
        raise ViewError(f"{path} is a submodule", path=path, hint="view it in its own repository")
    size = tree.size(path)
    if size > VIEW_MAX_BYTES:
        raise _too_large(path, size)
    return FileView(path, tree.read(path)[0], source)


def _walk_tree(tree: GitTree, prefix: str, depth: int) -> Iterator[str]:
    if tree.tree is None:  # an unborn branch: an empty root
        return
    for name, kind in sorted(tree.listdir(prefix)):
        rel = f"{prefix}/{name}" if prefix else name
        if kind == "dir":
            yield rel + "/"
            if depth > 1:
                yield from _walk_tree(tree, rel, depth - 1)
        elif kind == "symlink":
            yield rel + "@"
        elif kind == "submodule":
            yield rel + "/"
        else:
            yield rel


# --- both ----------------------------------------------------------------------------------------


def _bounded(entries: Iterator[str]) -> tuple[tuple[str, ...], int]:
    kept: list[str] = []
    left_out = 0
    for entry in entries:
        if len(kept) < LIST_MAX_ENTRIES:
            kept.append(entry)
        else:
            left_out += 1
    return tuple(kept), left_out


def _too_large(path: str, size: int) -> ViewError:
    return ViewError(
        f"{path} is {size} bytes, over the {VIEW_MAX_BYTES}-byte limit of a view",
        path=path,
        hint="read it in pieces with a shell command",
    )


__all__ = ["FileView", "FolderView", "ViewError", "view", "view_path"]
