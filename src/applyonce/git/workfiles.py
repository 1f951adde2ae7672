"""The files of a checkout's work tree as git sees them: the version (blob ID, mode) a file would
be committed as, the bytes git writes for a blob, and which paths a sparse checkout holds
(:mod:`applyonce.git.checkouts` uses them).

A blob's bytes go through git's filters on their way to the work tree: a clean/smudge driver (run
by git itself, :mod:`applyonce.git.filters`), libgit2's built-in end-of-line and ident filters, or
none. Most paths have none: their bytes are the blob's, read directly. Only where a built-in filter
may apply does libgit2 filter them (``BlobIO``, which runs the filter in a thread of its own).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pygit2

from applyonce.core.plan import MODE_EXEC, MODE_FILE, MODE_LINK
from applyonce.core.sparsity import SparsePatterns
from applyonce.git.filters import builtin_filters_apply, clean_blob, filter_of, smudged
from applyonce.git.indexlock import skips_worktree, stage_file
from applyonce.git.store import Version

SPARSE_CHECKOUT_FILE = "info/sparse-checkout"  # in the work tree's own git dir


@dataclass(frozen=True)
class SparseCheckout:
    """A sparse checkout (``core.sparseCheckout``), as git reads it for each command.

    ``patterns``: those of ``$GIT_DIR/info/sparse-checkout`` (the work tree's own git dir, for a
    linked one), which decide the skip-worktree bit of each path git writes; None when the file
    cannot be read (git then applies none and keeps the bits as they are). ``clears_present``:
    git takes the bit off an entry whose path holds something in the work tree, whenever it
    reads the index (unless ``sparse.expectFilesOutsideOfPatterns``): such a file is the user's
    to see, and its changes show in ``git status``."""

    patterns: SparsePatterns | None
    clears_present: bool = True

    def skips(self, index: pygit2.Index, root: Path, path: str) -> bool:
        """Whether git ignores the work tree at ``path``: its entry has the skip-worktree bit,
        and nothing is there (or git keeps the bit of a present file)."""
        if not skips_worktree(index, path):
            return False
        return not self.clears_present or not os.path.lexists(root / path)

    def excludes(self, path: str) -> bool | None:
        """Whether git leaves ``path`` out of the work tree (skip-worktree) when it writes it;
        None: no patterns decide, the entry's own bit does."""
        return None if self.patterns is None else not self.patterns.includes(path)


def sparse_checkout_of(checkout: pygit2.Repository) -> SparseCheckout | None:
    """The sparse checkout of ``checkout`` (its own configuration, ``config.worktree``
    included); None when it is not one (``core.sparseCheckout`` off). The patterns are read
    as git reads them: cone mode when ``core.sparseCheckoutCone`` is on and the file is in
    cone form, the names compared without case under ``core.ignoreCase``."""
    if not _config_bool(checkout, "core.sparseCheckout", default=False):
        return None
    clears = not _config_bool(checkout, "sparse.expectFilesOutsideOfPatterns", default=False)
    try:
        text = (Path(checkout.path) / SPARSE_CHECKOUT_FILE).read_bytes()
    except OSError:
        return SparseCheckout(None, clears)
    patterns = SparsePatterns.parse(
        text,
        cone=_config_bool(checkout, "core.sparseCheckoutCone", default=False),
        ignore_case=_config_bool(checkout, "core.ignoreCase", default=False),
    )
    return SparseCheckout(patterns, clears)


def _config_bool(checkout: pygit2.Repository, key: str, *, default: bool) -> bool:
    try:
        return bool(checkout.config.get_bool(key))
    except (KeyError, pygit2.GitError, ValueError):
        return default


def checkout_bytes(
    checkout: pygit2.Repository, root: Path, path: str, blob_id: str, *, autocrlf: str
) -> bytes:
    """The bytes git would write for the blob at ``path``: through a filter driver by git
    itself, else through libgit2's built-in filters (eol, ident) where they apply, as git would;
    else the blob's own bytes (``autocrlf``: :func:`applyonce.git.filters.autocrlf_of`)."""
    driver = filter_of(checkout, path)
    if driver is not None:
        return smudged(checkout, root, path, blob_id, driver)
    blob = checkout[blob_id]
    assert isinstance(blob, pygit2.Blob)
    if not builtin_filters_apply(checkout, path, autocrlf=autocrlf):
        return blob.data
    with pygit2.BlobIO(blob, as_path=path) as stream:
        return stream.read()


def workdir_blob(checkout: pygit2.Repository, root: Path, path: str) -> str | None:
    """The blob ID the work-tree file would be committed as (after the repo's clean filters)."""
    full = root / path
    try:
        if full.is_symlink():
            return str(pygit2.hash(os.readlink(full).encode()))
        if not full.is_file():
            if not full.exists():
                return None
            return "directory" if full.is_dir() else "special file"  # a FIFO, a socket
        driver = filter_of(checkout, path)
        if driver is not None:
            return clean_blob(checkout, root, path, driver)
        return str(checkout.hashfile(str(full), as_path=path))
    except (OSError, pygit2.GitError):
        return "unreadable"


def trusts_filemode(checkout: pygit2.Repository) -> bool:
    """``core.fileMode``: whether git reads the executable bit from the work tree."""
    try:
        return bool(checkout.config.get_bool("core.fileMode"))
    except (KeyError, pygit2.GitError, ValueError):
        return True


def workdir_version(
    checkout: pygit2.Repository, root: Path, path: str, staged: Version, *, trusts_mode: bool
) -> Version:
    """The version git would see in the work tree. Where the work tree cannot tell, git takes
    a regular file's mode from the index, and so does this: the executable bit under
    ``core.fileMode=false``, a symlink checked out as a plain file under ``core.symlinks=false``."""
    blob = workdir_blob(checkout, root, path)
    full = root / path
    try:
        st = os.lstat(full)
    except OSError:
        return (blob, None)
    if stat.S_ISLNK(st.st_mode):
        return (blob, MODE_LINK)
    if not stat.S_ISREG(st.st_mode):
        return (blob, None)
    if staged[1] == MODE_LINK or (not trusts_mode and staged[1] in (MODE_FILE, MODE_EXEC)):
        return (blob, staged[1])
    return (blob, MODE_EXEC if st.st_mode & stat.S_IXUSR else MODE_FILE)


def index_version(index: pygit2.Index, path: str) -> Version:
    """The version the index holds for ``path`` ((None, None): none)."""
    try:
        entry = index[path]
    except KeyError:
        return (None, None)
    return (str(entry.id), int(entry.mode))


def is_unmerged(index: pygit2.Index, path: str) -> bool:
    """Whether ``path`` has an unresolved merge conflict in the index (entries in stages 1-3)."""
    conflicts = index.conflicts
    return conflicts is not None and path in conflicts


def stage(index: pygit2.Index, full: Path, path: str, target: Version) -> None:
    """Record ``target`` (the commit's blob and mode) for ``path``, with the stat data of the work
    tree's file, as git checkout does. The mode is the commit's even under
    ``core.fileMode=false``, where the file's own bit does not count."""
    blob, mode = target
    assert blob is not None and mode is not None
    stage_file(index, path, blob, mode, full)


def file_mode(git_mode: int) -> int:
    """Permission bits for a checkout file, as git would give them under the user's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if git_mode == MODE_EXEC else 0o666) & ~umask
