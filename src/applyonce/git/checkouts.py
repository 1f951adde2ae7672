"""The user's checkouts of a branch: refusing a call over their uncommitted work, and bringing
them to the new tip after a call without losing any.

A path is *the user's* when the checkout holds a version of it (in the work tree or the index) that
the branch never had since the call's base: it is never overwritten, only reported. The index is
read and written under its lock, as git does (:mod:`applyonce.git.indexlock`), and paths with a
clean/smudge filter driver go through the real git (:mod:`applyonce.git.filters`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

from applyonce.core.plan import MODE_EXEC, MODE_FILE, MODE_GITLINK, MODE_LINK, MODE_TREE
from applyonce.errors import ApplyOnceError, ConflictError
from applyonce.faults import fault
from applyonce.git.filters import clean_blob, filter_of, smudged
from applyonce.git.indexlock import locked_index, read_index, skips_worktree, stage_file
from applyonce.git.store import GitStore, GitTree, Version
from applyonce.state.files import atomic_write, is_real_dir_chain, prune_empty_dirs, remove_file

_ZERO_OID = pygit2.Oid(hex="0" * 40)


class CheckoutSyncError(ApplyOnceError):
    """Git failed while the checkout was brought to the new tip (after the publish)."""

    kind = "sync"
    default_retryable = True
    default_hint = "run 'applyonce recover' to update the checkout"


class DirtyPathError(ConflictError):
    """A path the patch touches has uncommitted changes (or is untracked) in the checkout."""

    kind = "dirty-path"
    default_retryable = True
    default_hint = "commit or stash them, or pass --dirty commit"


@dataclass(frozen=True)
class DirtyPath:
    """A touched path the user changed in a checkout: the versions (blob ID, mode) it has in
    the work tree (``current``, what ``git add`` would stage), the index and the base."""

    path: str
    worktree: str
    current: Version
    staged: Version
    expected: Version

    def error(self) -> DirtyPathError:
        state = "is untracked" if self.expected[0] is None else "has uncommitted changes"
        return DirtyPathError(
            f"{self.path} {state} in the checkout at {self.worktree}",
            path=self.path,
            worktree=self.worktree,
        )


@dataclass(frozen=True)
class SyncReport:
    """What the checkout sync did."""

    worktree: str | None
    written: tuple[str, ...] = ()
    left_alone: tuple[str, ...] = ()
    failed: str | None = None  # why the sync could not run (it is retried by 'applyonce recover')


class Checkouts:
    """The work trees (main and linked) of one repository."""

    def __init__(self, store: GitStore) -> None:
        self.store = store

    def checkouts_of(self, ref: str) -> list[pygit2.Repository]:
        """The work trees (main and linked, from wherever we were opened) whose HEAD is ``ref``."""
        found: list[pygit2.Repository] = []
        candidates: list[pygit2.Repository] = []
        seen: set[str] = set()
        main = pygit2.Repository(str(self.store.common_dir))
        paths = [None if main.is_bare else main.workdir]
        for name in main.list_worktrees():
            with contextlib.suppress(pygit2.GitError, KeyError):
                paths.append(main.lookup_worktree(name).path)
        for path in paths:
            if path is None:
                continue
            real = os.path.realpath(path)
            if real in seen:
                continue
            seen.add(real)
            with contextlib.suppress(pygit2.GitError, KeyError):
                candidates.append(pygit2.Repository(path))
        for repo in candidates:
            if repo.is_bare:
                continue
            head = repo.references.get("HEAD")
            if (
                head is not None
                and head.type == pygit2.enums.ReferenceType.SYMBOLIC
                and str(head.target) == ref
            ):
                found.append(repo)
        return found

    def find_dirty_paths(self, ref: str, base: GitTree, paths: Iterable[str]) -> None:
        """Refuse the call if the checkout of ``ref`` has user changes on ``paths``.

        Raises:
            DirtyPathError: a touched path differs from the base (modified, staged, untracked).
            UnsupportedIndexError: the checkout has a split index.
            FilterDriverError: a path's filter driver is missing or fails.
        """
        for found in self._dirty(ref, base, paths):
            raise found.error()

    def dirty_paths(self, ref: str, base: GitTree, paths: Iterable[str]) -> list[str]:
        """The touched paths the checkouts of ``ref`` hold in a version ``base`` does not
        (reads only)."""
        return sorted({found.path for found in self._dirty(ref, base, paths)})

    def dirty_versions(self, ref: str, base: GitTree, paths: Iterable[str]) -> list[DirtyPath]:
        """The user's changes on ``paths`` in the checkouts of ``ref``, each as the version
        ``git commit -- PATH`` would commit (the work tree's file, through the clean filters),
        its blob written (for ``--dirty commit``). Reads the checkout; writes objects only.

        Raises:
            DirtyPathError: a change that cannot be committed as it is: a directory or an
                unreadable file where the path is, staged content that differs from the work
                tree's (committing either would lose the other), or two checkouts that differ.
        """
        found: dict[str, DirtyPath] = {}
        for dirty in self._dirty(ref, base, paths):
            path = dirty.path
            if dirty.current[0] in ("directory", "special file", "unreadable"):
                raise DirtyPathError(
                    f"{path} is a {dirty.current[0]} in the checkout at {dirty.worktree},"
                    " which cannot be committed as a file",
                    path=path,
                    worktree=dirty.worktree,
                    hint="move it aside, then repeat the call",
                )
            if dirty.expected[0] is None and _ignored(dirty):
                # git add and git commit leave an ignored file out unless forced: it may hold
                # secrets (a .env), so its bytes never go into a snapshot on the branch.
                raise DirtyPathError(
                    f"{path} is an untracked file that git ignores in the checkout at"
                    f" {dirty.worktree}; --dirty commit never commits an ignored file",
                    path=path,
                    worktree=dirty.worktree,
                    hint="move it aside (or 'git add -f' it yourself), then repeat the call",
                )
            if dirty.staged not in (dirty.current, dirty.expected):
                raise DirtyPathError(
                    f"{path} has staged changes that differ from the work tree in the checkout"
                    f" at {dirty.worktree}",
                    path=path,
                    worktree=dirty.worktree,
                    hint="stage all of it ('git add') or none of it, then repeat the call",
                )
            if path in found and found[path].current != dirty.current:
                raise DirtyPathError(
                    f"{path} has different uncommitted changes in two checkouts",
                    path=path,
                    hint="commit or stash them in one of the checkouts, then repeat the call",
                )
            found[path] = dirty
        for dirty in found.values():
            self._write_blob(dirty)
        return list(found.values())

    def _write_blob(self, dirty: DirtyPath) -> None:
        """Write the object of the work tree's version of ``dirty.path`` (as ``git add`` would)."""
        blob = dirty.current[0]
        if blob is None:
            return
        if blob in self.store.repo:  # kept for the publish, like every object of the staging
            self.store.written.remember(pygit2.Oid(hex=blob))
            return
        checkout = pygit2.Repository(dirty.worktree)
        full = Path(dirty.worktree) / dirty.path
        if full.is_symlink():
            oid = self.store.repo.create_blob(os.fsencode(os.readlink(full)))
        elif (driver := filter_of(checkout, dirty.path)) is not None:
            oid = pygit2.Oid(
                hex=clean_blob(checkout, Path(dirty.worktree), dirty.path, driver, write=True)
            )
        else:
            oid = checkout.create_blob_fromworkdir(dirty.path)
        if str(oid) != blob:
            raise DirtyPathError(
                f"{dirty.path} changed while it was read in the checkout at {dirty.worktree}",
                path=dirty.path,
                worktree=dirty.worktree,
                hint="repeat the call",
            )
        self.store.written.remember(oid)

    def _dirty(self, ref: str, base: GitTree, paths: Iterable[str]) -> Iterator[DirtyPath]:
        """Each touched path that a checkout of ``ref`` holds in a version the base does not."""
        paths = list(paths)
        for checkout in self.checkouts_of(ref):
            root = Path(checkout.workdir)
            index = read_index(checkout)
            trusts_mode = _trusts_filemode(checkout)
            for path in paths:
                if base.kind(path) in ("dir", "submodule"):
                    continue  # not a file: the planner refuses the operation itself
                expected = base.version(path)
                staged = _index_version(index, path)
                if skips_worktree(index, path):  # git ignores its work-tree file, and so do we
                    current = staged
                else:
                    current = _workdir_version(
                        checkout, root, path, staged, trusts_mode=trusts_mode
                    )
                if current != expected or staged != expected:
                    yield DirtyPath(path, str(root), current, staged, expected)

    def sync_checkouts(
        self, ref: str, base_commit: str | None, paths: Iterable[str], *, journal: Path
    ) -> list[SyncReport]:
        """Bring ``paths`` in every checkout of ``ref`` to the branch tip, without losing work.

        A path is written only if the checkout still holds a version of it that the branch has had
        since ``base_commit`` (in both the work tree and the index); anything else is the user's
        and is left alone, and reported. Each checkout's index is held locked from its read to its
        write (``journal``: where the lock is recorded first, see ``state.lockjournal``).

        Raises:
            ApplyOnceError: the index stays locked, is a split index, a filter driver fails, or
                Git fails (:class:`CheckoutSyncError`): the sync is left for ``recover``.
        """
        tip = self.store.tip(ref)
        reports: list[SyncReport] = []
        paths = list(paths)
        for checkout in self.checkouts_of(ref):
            try:
                with locked_index(checkout, journal, paths) as locked:
                    report = self._sync_one(checkout, locked.index, tip, base_commit, paths)
                    if report.written:
                        locked.commit()
            except pygit2.GitError as exc:
                raise CheckoutSyncError(
                    f"git failed updating the checkout at {checkout.workdir}: {exc}"
                ) from None
            reports.append(report)
        return reports

    def _sync_one(
        self,
        checkout: pygit2.Repository,
        index: pygit2.Index,
        tip: str | None,
        base_commit: str | None,
        paths: list[str],
    ) -> SyncReport:
        root = Path(checkout.workdir)
        tip_tree = self.store.tree_at(tip)
        known = self._versions_since(tip, base_commit, paths)
        written: list[str] = []
        left: list[str] = []
        trusts_mode = _trusts_filemode(checkout)
        skipped: list[tuple[str, Version]] = []
        # Everything that can fail on the user's setup (a clean or smudge filter) runs before the
        # first write: the sync writes all the paths it may write, or none.
        planned: list[tuple[str, Version, Version, Version, bytes | None]] = []
        for path in paths:
            target = tip_tree.version(path)
            staged = _index_version(index, path)
            if skips_worktree(index, path):
                # Outside the sparse checkout: git keeps only the index entry, and so do we.
                if staged != target and staged in known[path]:
                    skipped.append((path, target))
                elif staged != target:
                    left.append(path)
                continue
            current = _workdir_version(checkout, root, path, staged, trusts_mode=trusts_mode)
            if current == target and staged == target:
                continue
            if current not in known[path] or staged not in known[path]:
                left.append(path)
                continue
            if not is_real_dir_chain(root, path):
                left.append(path)
                continue
            full = root / path
            if full.is_dir() and not full.is_symlink():
                left.append(path)
                continue
            data: bytes | None = None
            entry = tip_tree.entry(path) if target[0] is not None else None
            if entry is not None and entry.filemode != MODE_LINK:
                data = self._checkout_bytes(checkout, root, path, entry.id)
            planned.append((path, target, staged, current, data))
        for path, target in skipped:
            if target[0] is None:
                index.remove(path)
            else:
                assert target[1] is not None
                stage_file(index, path, target[0], target[1], None)
            written.append(path)
        for path, target, staged, current, data in planned:
            full = root / path
            if target[0] is None:
                remove_file(full)
                prune_empty_dirs(full.parent, root)
                if staged[0] is not None:
                    index.remove(path)
            elif (
                current[0] == target[0]
                and not trusts_mode
                and {current[1], target[1]} <= {MODE_FILE, MODE_EXEC}
            ):
                # Only the mode changed, and git ignores the work tree's bit here
                # (core.fileMode=false): the index entry alone carries it.
                _stage(index, full, path, target)
            else:
                entry = tip_tree.entry(path)
                assert entry is not None
                full.parent.mkdir(parents=True, exist_ok=True)
                if full.is_symlink():
                    full.unlink()  # a known version of the path: replaced, not written through
                if entry.filemode == MODE_LINK:
                    link = self.store.repo[entry.id]
                    assert isinstance(link, pygit2.Blob)
                    os.symlink(link.data, full)
                else:
                    assert data is not None
                    atomic_write(
                        full,
                        data,
                        mode=_file_mode(entry.filemode),
                        durable=False,
                        before_replace=_during_sync,
                    )
                _stage(index, full, path, target)
            written.append(path)
        return SyncReport(str(root), tuple(written), tuple(left))

    def _checkout_bytes(
        self, checkout: pygit2.Repository, root: Path, path: str, blob_id: pygit2.Oid
    ) -> bytes:
        """The bytes git would write for the blob at ``path``: through a filter driver by git
        itself, else through libgit2's built-in filters (eol, ident), as git would."""
        driver = filter_of(checkout, path)
        if driver is not None:
            return smudged(checkout, root, path, str(blob_id), driver)
        blob = self.store.repo[blob_id]
        assert isinstance(blob, pygit2.Blob)
        with pygit2.BlobIO(blob, as_path=path) as stream:
            return stream.read()

    def _versions_since(
        self, tip: str | None, base_commit: str | None, paths: list[str]
    ) -> dict[str, set[Version]]:
        """Every version (blob ID and mode) each path had from ``base_commit`` to ``tip``: its
        version at the base plus every version a commit in between introduced (one tree diff a
        commit, so the cost follows the changes, not commits x paths)."""
        base_tree = self.store.tree_at(base_commit)
        versions: dict[str, set[Version]] = {path: {base_tree.version(path)} for path in paths}
        for commit in self.store.commits(tip, hide=base_commit):
            if not commit.parents:  # a root commit: its versions are simply its own
                root = GitTree(self.store.repo, commit.tree)
                for path in paths:
                    versions[path].add(root.version(path))
                continue
            for delta in commit.parents[0].tree.diff_to_tree(commit.tree).deltas:
                for side in (delta.old_file, delta.new_file):
                    if side.path in versions:
                        absent = side.id == _ZERO_OID or side.mode in (MODE_TREE, MODE_GITLINK)
                        version = (None, None) if absent else (str(side.id), int(side.mode))
                        versions[side.path].add(version)
        return versions


def _workdir_blob(checkout: pygit2.Repository, root: Path, path: str) -> str | None:
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


def _trusts_filemode(checkout: pygit2.Repository) -> bool:
    """``core.fileMode``: whether git reads the executable bit from the work tree."""
    try:
        return bool(checkout.config.get_bool("core.fileMode"))
    except (KeyError, pygit2.GitError, ValueError):
        return True


def _workdir_version(
    checkout: pygit2.Repository, root: Path, path: str, staged: Version, *, trusts_mode: bool
) -> Version:
    """The version git would see in the work tree. Where the work tree cannot tell, git takes
    a regular file's mode from the index, and so does this: the executable bit under
    ``core.fileMode=false``, a symlink checked out as a plain file under ``core.symlinks=false``."""
    blob = _workdir_blob(checkout, root, path)
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


def _index_version(index: pygit2.Index, path: str) -> Version:
    try:
        entry = index[path]
    except KeyError:
        return (None, None)
    return (str(entry.id), int(entry.mode))


def _stage(index: pygit2.Index, full: Path, path: str, target: Version) -> None:
    """Record ``target`` (the commit's blob and mode) for ``path``, with the stat data of the work
    tree's file, as git checkout does. The mode is the commit's even under
    ``core.fileMode=false``, where the file's own bit does not count."""
    blob, mode = target
    assert blob is not None and mode is not None
    stage_file(index, path, blob, mode, full)


def _during_sync() -> None:
    fault("during-sync")


def _file_mode(git_mode: int) -> int:
    """Permission bits for a checkout file, as git would give them under the user's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if git_mode == MODE_EXEC else 0o666) & ~umask


def _ignored(dirty: DirtyPath) -> bool:
    """Whether ``dirty.path`` is outside the checkout's index and ignored there (.gitignore,
    info/exclude, core.excludesFile), as ``git add`` judges it."""
    checkout = pygit2.Repository(dirty.worktree)
    return dirty.path not in checkout.index and checkout.path_is_ignored(dirty.path)
