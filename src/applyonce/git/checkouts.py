"""The user's checkouts of a branch: refusing a call over their uncommitted work, and bringing
them to the new tip after a call without losing any.

What a checkout shows is what its index records (the blob of each path, as git checked it out),
not the branch's tip: the branch may have moved without it (a sync left for later, a ref moved
by ``git update-ref``, a remote's branch that another clone moved). :class:`Shown` says which
commits a checkout may still show besides the tip. A path is *the user's* when the checkout
holds a version of it (in the work tree or the index) that the branch never had in those
commits: it is never overwritten, only reported; a path that holds such a version in both is
the checkout lagging, which a sync brings up as ``git merge --ff-only`` would. The index is
read and written under its lock, as git does (:mod:`applyonce.git.indexlock`), and paths with a
clean/smudge filter driver go through the real git (:mod:`applyonce.git.filters`).

In a sparse checkout, each path a sync writes is in or out of the work tree as the sparse
patterns say (:mod:`applyonce.core.sparsity`), as ``git merge`` decides it: a path they leave
out, new or not, is an index entry with the skip-worktree bit and no file. What git ignores is
what the user sees: an entry with the bit whose file is there anyway is the user's file (git
takes the bit off as it reads the index, and ``git status`` shows its changes).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from applyonce.core.plan import MODE_EXEC, MODE_FILE, MODE_LINK
from applyonce.errors import ApplyOnceError, ConflictError
from applyonce.faults import fault
from applyonce.git.filters import autocrlf_of, clean_blob, filter_of
from applyonce.git.indexlock import (
    LockedIndex,
    lent,
    locked_index,
    reading_index,
    skips_worktree,
    stage_file,
)
from applyonce.git.store import GitStore, GitTree, RefMove, Version, moves_of
from applyonce.git.versions import versions_since
from applyonce.git.workfiles import (
    SparseCheckout,
    checkout_bytes,
    file_mode,
    index_version,
    is_unmerged,
    sparse_checkout_of,
    stage,
    trusts_filemode,
    workdir_version,
)
from applyonce.state.files import (
    atomic_write,
    blocking_parent,
    ensure_dir,
    fsync_dir,
    is_real_dir_chain,
    prune_empty_dirs,
    remove_file,
)

# Directories the sync makes in a work tree: as git makes them (0777, narrowed by the umask).
WORKTREE_DIR = 0o777

# A path synced as an index entry with the skip-worktree bit (its target version; None: the
# entry goes), and whether a file the branch had there is removed from the work tree.
_Skipped = tuple[str, Version, bool]


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
class Shown:
    """The commits a checkout of a branch may show besides the branch's tip (apart from the
    user's own edits): any commit from ``since`` to the tip (None: from none at all, the branch
    unborn), or one of ``tips`` (which need not be on the way to the tip). ``Shown(tip)``: the
    checkout shows the tip itself."""

    since: str | None
    tips: tuple[str, ...] = ()
    # Where the branch is checked out in several work trees: what each of them (by its root)
    # may show, when it is less than all of them together (``since`` and ``tips``) may.
    each: tuple[tuple[str, Shown], ...] = ()

    def lags(self, tip: str | None) -> bool:
        """Whether a checkout may show something else than ``tip``."""
        return self.since != tip or any(t != tip for t in self.tips)

    def of(self, worktree: str) -> Shown:
        """What the checkout at ``worktree`` may show."""
        return next((own for root, own in self.each if root == worktree), self)


@dataclass(frozen=True)
class CheckoutLog:
    """A work tree's own record of how its checkout moved: its ``HEAD``'s reflog (a branch's
    reflog is shared by every work tree that has it checked out; git writes each move also to
    the ``HEAD`` log of the work tree whose command made it, and of no other)."""

    worktree: str
    moves: frozenset[tuple[str | None, str, str]]  # (old, new, message) of each entry
    # The time of its oldest entry: the work tree was made then (None: not known), and showed
    # what its branch was at that time.
    started: int | None

    def moved(self, move: RefMove) -> bool:
        """Whether the branch move ``move`` was made by a command run in this work tree."""
        return (move.old, move.new, move.message) in self.moves


@dataclass(frozen=True)
class DirtyPath:
    """A touched path the user changed in a checkout: the versions (blob ID, mode) it has in
    the work tree (``current``, what ``git add`` would stage), the index and the base."""

    path: str
    worktree: str
    current: Version
    staged: Version
    expected: Version
    # Untracked, and ignored by git there (.gitignore, info/exclude, core.excludesFile).
    ignored: bool = field(default=False, compare=False)
    # The change was made on another version of the path than the base's (the checkout lags
    # the branch there): committing it on the base would undo the branch's later change.
    on_older: bool = field(default=False, compare=False)
    # The path has an unresolved merge conflict (its index entries are in stages 1-3).
    unmerged: bool = field(default=False, compare=False)
    # A folder of the path that is something else in the checkout (an untracked file or
    # symlink, a file staged there), and what it is: the call's file cannot be written below it.
    blocker: tuple[str, str] | None = field(default=None, compare=False)
    # The commands that bring the checkout up to the branch keeping the user's changes (for a
    # change ``on_older``; None: none is known).
    catch_up: str | None = field(default=None, compare=False)

    def error(self) -> DirtyPathError:
        """The refusal of this change, in words true to its case, with what to do."""
        where = f"in the checkout at {self.worktree}"
        if self.blocker is not None:
            folder, what = self.blocker
            staged = what == "a staged file"
            return DirtyPathError(
                f"{folder} is {what} {where}, in the way of {self.path}",
                path=self.path,
                worktree=self.worktree,
                hint=(
                    f"unstage it ('git rm --cached {folder}') and move it away, then repeat"
                    " the call"
                    if staged
                    else "move it away, then repeat the call"
                ),
            )
        if self.unmerged:
            return DirtyPathError(
                f"{self.path} has an unresolved merge conflict {where}",
                path=self.path,
                worktree=self.worktree,
                hint=f"resolve the conflict ('git add {self.path}' or 'git rm {self.path}' once"
                " resolved), then repeat the call",
            )
        if self.on_older:
            return DirtyPathError(
                f"{self.path} has uncommitted changes {where}, made on an older version of it"
                " than the branch has (the checkout has not caught up with the branch)",
                path=self.path,
                worktree=self.worktree,
                hint=(
                    f"bring the checkout up to the branch, keeping your changes ('{self.catch_up}'"
                    ": a conflict leaves them marked in the file, and in the stash), then repeat"
                    " the call"
                    if self.catch_up is not None
                    else "merge them with the branch's version of the file, then repeat the call"
                ),
            )
        kind = self.current[0]
        if kind in ("directory", "special file"):
            return DirtyPathError(
                f"{self.path} is a {kind} {where}, where the call writes a file",
                path=self.path,
                worktree=self.worktree,
                hint="move it away, then repeat the call",
            )
        if kind == "unreadable":
            return DirtyPathError(
                f"{self.path} cannot be read {where}",
                path=self.path,
                worktree=self.worktree,
                hint="make it readable, or move it away, then repeat the call",
            )
        if self.expected[0] is None and self.staged[0] is None:
            # 'git stash' leaves an untracked file where it is, and --dirty commit never
            # commits one: only moving it, or the user's own 'git add', settles it.
            what = "an untracked file that git ignores" if self.ignored else "untracked"
            add = "'git add -f'" if self.ignored else "'git add'"
            return DirtyPathError(
                f"{self.path} is {what} {where}",
                path=self.path,
                worktree=self.worktree,
                hint=f"move it away or {add} it, then repeat the call",
            )
        return DirtyPathError(
            f"{self.path} has uncommitted changes {where}",
            path=self.path,
            worktree=self.worktree,
        )


def keep_edits_command(branch: str, shown: str) -> str:
    """The git commands that bring a checkout that shows ``shown`` (its index and files, while
    ``branch`` moved on) to ``branch``'s tip, keeping the user's uncommitted changes: ``HEAD``
    is pointed, detached, at what the checkout shows, so that ``git stash`` records the changes
    against it; then the branch is checked out and the stash applied on it (a three-way merge:
    a conflict leaves them marked in the file, and the stash is kept). ``git stash`` alone
    would record them against the branch's tip, as if they undid its commits."""
    return (
        f"git checkout --detach && git reset --soft {shown[:12]} && git stash && git checkout"
        f" {branch} && git stash pop"
    )


def pull_command(remote: str, branch: str) -> str:
    """The git command that brings a checkout of ``branch`` up to ``remote``'s, keeping the
    user's uncommitted changes (stashed and applied again: a conflict leaves them marked in the
    file, and in the stash)."""
    return f"git pull --ff-only --autostash {remote} {branch}"


@dataclass(frozen=True)
class SyncReport:
    """What the checkout sync did. ``left_alone``: paths holding the user's changes, as they
    were; ``behind``: those of them whose index does not hold the tip's version either (the
    checkout does not show the tip there)."""

    worktree: str | None
    written: tuple[str, ...] = ()
    left_alone: tuple[str, ...] = ()
    failed: str | None = None  # why the sync could not run (it is retried by 'applyonce recover')
    behind: tuple[str, ...] = ()
    # The branch (its short name) here did not follow the remote's to the call's commit.
    unfollowed: str | None = None
    # What the checkout was brought from (the sync's base: the files it left hold the user's
    # changes made on that version).
    since: str | None = None
    # With ``unfollowed``: the branch here holds commits the remote's does not (the user's).
    diverged: bool = False

    @property
    def shows_tip(self) -> bool:
        """Whether the checkout shows the tip now (its own edits on top of it aside)."""
        return self.failed is None and not self.behind and self.unfollowed is None


class HeldIndexes:
    """The checkouts of a branch (``checkouts``), and the ``index.lock`` of each that could be
    taken, held with its index read under it (see :meth:`Checkouts.holding`)."""

    def __init__(self, checkouts: Sequence[pygit2.Repository]) -> None:
        self.checkouts = checkouts
        self._locked: dict[str, tuple[LockedIndex, contextlib.ExitStack]] = {}

    def hold(self, checkout: pygit2.Repository, locked: LockedIndex, stack: ExitStack) -> None:
        self._locked[checkout.path] = (locked, stack)

    def of(self, checkout: pygit2.Repository) -> LockedIndex | None:
        """The held index of ``checkout`` (None: its lock is not held here)."""
        held = self._locked.get(checkout.path)
        return held[0] if held is not None else None

    def release(self, checkout: pygit2.Repository) -> None:
        """Release ``checkout``'s lock now (its index written, or left as it was), as git
        releases ``index.lock`` once it has written the index: before anything is recorded as
        synced, the index is durable and the lock gone."""
        held = self._locked.pop(checkout.path, None)
        if held is not None:
            held[1].close()


class Checkouts:
    """The work trees (main and linked) of one repository."""

    def __init__(self, store: GitStore, scratch_dir: Path | None = None) -> None:
        self.store = store
        # Where the index is read and written on its way into .git (the lock journal's folder).
        self.scratch_dir = scratch_dir

    def checkouts_of(self, ref: str) -> list[pygit2.Repository]:
        """The work trees (main and linked, from wherever we were opened) whose HEAD is ``ref``."""
        return [repo for repo, head in self._work_trees() if head == ref]

    def checked_out(self) -> list[str]:
        """The branches the work trees (main and linked) have checked out, each once."""
        return sorted({head for _, head in self._work_trees() if head is not None})

    def _work_trees(self) -> list[tuple[pygit2.Repository, str | None]]:
        """Each work tree (main and linked) with the branch its HEAD names (None: detached)."""
        found: list[tuple[pygit2.Repository, str | None]] = []
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
                candidates.append(self.store.open_checkout(path))
        for repo in candidates:
            if repo.is_bare:
                continue
            head = repo.references.get("HEAD")
            symbolic = head is not None and head.type == pygit2.enums.ReferenceType.SYMBOLIC
            found.append((repo, str(head.target) if symbolic and head is not None else None))
        return found

    def head_logs(self, checkouts: Sequence[pygit2.Repository], limit: int) -> list[CheckoutLog]:
        """The ``HEAD`` reflog of each of ``checkouts`` (its last ``limit`` entries)."""
        logs = []
        for checkout in checkouts:
            moves = moves_of(checkout, "HEAD", limit)
            logs.append(
                CheckoutLog(
                    str(Path(checkout.workdir)),
                    frozenset((m.old, m.new, m.message) for m in moves),
                    # Read to its start only: an entry past the limit may be older.
                    moves[-1].time if moves and len(moves) < limit else None,
                )
            )
        return logs

    def empty_checkouts(self, checkouts: Sequence[pygit2.Repository], tip: GitTree) -> list[str]:
        """The work trees among ``checkouts`` whose index has no entry at all while the branch's
        ``tip`` has files: they show no commit of it (it was unborn there when it got its
        commits), so git sees each of its files as deleted there."""
        if tip.tree is None or len(tip.tree) == 0:
            return []
        empty = []
        for checkout in checkouts:
            with reading_index(checkout, scratch_dir=self.scratch_dir) as index:
                if len(index) == 0:
                    empty.append(str(Path(checkout.workdir)))
        return empty

    def find_dirty_paths(
        self,
        ref: str,
        base: GitTree,
        paths: Iterable[str],
        *,
        base_commit: str | None = None,
        shown: Shown | None = None,
        remote: str | None = None,
    ) -> None:
        """Refuse the call if the checkout of ``ref`` has user changes on ``paths``
        (``shown``: what the checkouts may show besides ``base_commit``, whose tree is
        ``base``; a path they hold in one of those versions is not the user's; ``remote``: the
        remote whose branch ``base_commit`` is, see :meth:`_dirty`).

        Raises:
            DirtyPathError: a touched path differs from the base (modified, staged, untracked,
                unmerged), or a folder of it is a file or symlink of the user's.
            UnsupportedIndexError: the checkout has a split index.
            FilterDriverError: a path's filter driver is missing or fails.
        """
        for found in self._dirty(
            ref, base, paths, base_commit=base_commit, shown=shown, remote=remote
        ):
            raise found.error()

    def dirty_paths(
        self,
        ref: str,
        base: GitTree,
        paths: Iterable[str],
        *,
        base_commit: str | None = None,
        shown: Shown | None = None,
        remote: str | None = None,
    ) -> list[str]:
        """The touched paths the checkouts of ``ref`` hold in a version of the user's (see
        :meth:`find_dirty_paths`; reads only)."""
        found = self._dirty(
            ref, base, paths, base_commit=base_commit, shown=shown, writes=False, remote=remote
        )
        return sorted({dirty.path for dirty in found})

    def dirty_versions(
        self,
        ref: str,
        base: GitTree,
        paths: Iterable[str],
        *,
        base_commit: str | None = None,
        shown: Shown | None = None,
        remote: str | None = None,
    ) -> list[DirtyPath]:
        """The user's changes on ``paths`` in the checkouts of ``ref`` (see
        :meth:`find_dirty_paths`), each as the version ``git commit -- PATH`` would commit
        (the work tree's file, through the clean filters), its blob written (for ``--dirty
        commit``). Reads the checkout; writes objects only.

        Raises:
            DirtyPathError: a change that cannot be committed as it is: an untracked file (it
                may hold anything, a credential say: only the user commits it), a merge
                conflict, a file or symlink where a folder of the path is, a directory or
                an unreadable file where the path is, staged content that differs from the
                work tree's (committing either would lose the other), two checkouts that
                differ, or a change made on an older version of the path than the base's
                (committing it would undo the branch's later change).
        """
        found: dict[str, DirtyPath] = {}
        for dirty in self._dirty(
            ref, base, paths, base_commit=base_commit, shown=shown, remote=remote
        ):
            path = dirty.path
            if dirty.blocker is not None or dirty.unmerged:
                raise dirty.error()  # nothing there to commit as the path's file
            if dirty.current[0] in ("directory", "special file", "unreadable"):
                raise DirtyPathError(
                    f"{path} is a {dirty.current[0]} in the checkout at {dirty.worktree},"
                    " which cannot be committed as a file",
                    path=path,
                    worktree=dirty.worktree,
                    hint="move it aside, then repeat the call",
                )
            if dirty.expected[0] is None and dirty.ignored:
                # git add and git commit leave an ignored file out unless forced: it may hold
                # secrets (a .env), so its bytes never go into a snapshot on the branch.
                raise DirtyPathError(
                    f"{path} is an untracked file that git ignores in the checkout at"
                    f" {dirty.worktree}; --dirty commit never commits an ignored file",
                    path=path,
                    worktree=dirty.worktree,
                    hint="move it aside (or 'git add -f' it yourself), then repeat the call",
                )
            if dirty.staged[0] is None and dirty.current[0] is not None:
                # Not in the index: nobody asked git to track it. Its bytes (a credential, a
                # scratch file) go into the branch's history only by the user's own 'git add'.
                raise DirtyPathError(
                    f"{path} is an untracked file in the checkout at {dirty.worktree};"
                    " --dirty commit never commits an untracked file",
                    path=path,
                    worktree=dirty.worktree,
                    hint=f"move it aside (or 'git add {path}' it yourself if it belongs in the"
                    " branch), then repeat the call",
                )
            if dirty.on_older:
                raise dirty.error()
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
        """Write the object of the work tree's version of ``dirty.path`` (as ``git add`` would)
        as every object of the staging is written: into memory, then into the staging's kept
        pack — never as a loose object, which git's housekeeping can pull from under the
        write (``git prune-packed`` removes the empty ``objects/xx`` folder libgit2 is about to
        rename it into) or delete before the publish (``git prune --expire=now``)."""
        blob = dirty.current[0]
        if blob is None:
            return
        if blob in self.store.repo:  # kept for the publish, like every object of the staging
            self.store.written.remember(pygit2.Oid(hex=blob))
            return
        # The checkout's own repository applies its clean filters (its attributes, its index);
        # what it writes goes into the staging's memory.
        checkout = self.store.open_checkout(dirty.worktree)
        self.store.written.serve(checkout)
        full = Path(dirty.worktree) / dirty.path
        if full.is_symlink():
            oid = self.store.repo.create_blob(os.fsencode(os.readlink(full)))
        elif (driver := filter_of(checkout, dirty.path)) is not None:
            # git runs the driver and writes the blob itself (as 'git add' does, loose).
            oid = pygit2.Oid(
                hex=clean_blob(checkout, Path(dirty.worktree), dirty.path, driver, write=True)
            )
        else:
            # Its clean filters may look at the index.
            with reading_index(checkout, scratch_dir=self.scratch_dir):
                oid = checkout.create_blob_fromworkdir(dirty.path)
        if str(oid) != blob:
            raise DirtyPathError(
                f"{dirty.path} changed while it was read in the checkout at {dirty.worktree}",
                path=dirty.path,
                worktree=dirty.worktree,
                hint="repeat the call",
            )
        self.store.written.remember(oid)

    def _dirty(
        self,
        ref: str,
        base: GitTree,
        paths: Iterable[str],
        *,
        base_commit: str | None = None,
        shown: Shown | None = None,
        writes: bool = True,
        remote: str | None = None,
    ) -> list[DirtyPath]:
        """Each touched path that a checkout of ``ref`` holds in a version of the user's: one
        the base does not have, nor (where the checkout lags, see ``shown``) the commits it may
        still show, in both the index and the work tree; or has a conflict of the user's merge;
        or cannot be written there (a folder of it is a file or symlink of the user's). Only the
        touched paths are looked at (the index entry, the work-tree file, the folders on the
        way). ``writes``: False to make no file at all (a dry run). ``remote``: the remote whose
        branch ``base_commit`` is (``--remote``), for the command that catches a checkout up."""
        paths = list(paths)
        found: list[DirtyPath] = []
        checkouts = self.checkouts_of(ref)
        local = self.store.tip(ref)
        # Per work tree (the branch may be checked out in several, each showing its own), the
        # versions each path had in the commits it may show; one walk per distinct answer.
        versions: dict[tuple[str | None, tuple[str, ...]], dict[str, set[Version]]] = {}
        for checkout in checkouts:
            root = Path(checkout.workdir)
            own = shown.of(str(root)) if shown is not None else None
            known: dict[str, set[Version]] | None = None
            if own is not None and own.lags(base_commit):
                key = (own.since, own.tips)
                if key not in versions:
                    versions[key] = versions_since(
                        self.store, base_commit, own.since, paths, also=own.tips
                    )
                known = versions[key]
            catch_up = _catch_up_command(ref, own, base_commit, local, remote)
            sparse = sparse_checkout_of(checkout)
            with reading_index(checkout, writes=writes, scratch_dir=self.scratch_dir) as index:
                trusts_mode = trusts_filemode(checkout)
                for path in paths:
                    if base.kind(path) in ("dir", "submodule"):
                        continue  # not a file: the planner refuses the operation itself
                    expected = base.version(path)
                    staged = index_version(index, path)
                    blocker: tuple[str, str] | None = None
                    if _skips(sparse, index, root, path):  # git ignores the work tree there
                        current = staged
                    else:
                        blocker = _blocker(index, root, path)
                        current = workdir_version(
                            checkout, root, path, staged, trusts_mode=trusts_mode
                        )
                    unmerged = staged[0] is None and is_unmerged(index, path)
                    settled = blocker is None and not unmerged
                    if settled and current == expected and staged == expected:
                        continue
                    had = known[path] if known is not None else {expected}
                    if settled and staged in had and current in had:
                        continue  # the checkout lags here: the branch's, not the user's
                    ignored = (
                        expected[0] is None and path not in index and checkout.path_is_ignored(path)
                    )
                    # Made on the base's version only if the index holds it, or the path is the
                    # same in every commit the checkout may show (a staged change of the user's
                    # there tells nothing of what it was made on).
                    on_older = staged != expected and (staged in had or had != {expected})
                    found.append(
                        DirtyPath(
                            path,
                            str(root),
                            current,
                            staged,
                            expected,
                            ignored,
                            on_older,
                            unmerged,
                            blocker,
                            catch_up,
                        )
                    )
        return found

    @contextlib.contextmanager
    def holding(
        self,
        ref: str,
        paths: Sequence[str],
        *,
        journal: Path,
        wait: float,
        checkouts: Sequence[pygit2.Repository] | None = None,
    ) -> Iterator[HeldIndexes]:
        """Hold the ``index.lock`` of every checkout of ``ref`` for the block, each taken within
        ``wait`` seconds or not at all (another git holds it; the sync then tries again), as git
        holds it while it moves a branch and writes the index that goes with it: a ``git
        commit`` that read the branch's new tip meanwhile cannot commit the old index's files
        over it. ``paths``: the work-tree files a sync may write (``journal``: where each lock
        is recorded first, see ``state.lockjournal``). ``checkouts``: :meth:`checkouts_of`
        ``ref``, if the caller has them already.

        :meth:`sync_checkouts` releases a checkout's lock once it has written (or left) its
        index; every other one is released when the block ends, its index as it was.
        """
        if checkouts is None:
            checkouts = self.checkouts_of(ref)
        held = HeldIndexes(checkouts)
        with ExitStack() as stack:
            for checkout in checkouts:
                own = stack.enter_context(ExitStack())  # released by the sync, or at the end
                # Not held, for whatever reason (the user's git has it, the index cannot be
                # read): the sync takes it itself, or says why it cannot.
                with contextlib.suppress(ApplyOnceError, pygit2.GitError, OSError):
                    locked = own.enter_context(locked_index(checkout, journal, paths, wait=wait))
                    held.hold(checkout, locked, own)
            yield held

    def sync_checkouts(
        self,
        ref: str,
        base_commit: str | None,
        paths: Iterable[str],
        *,
        journal: Path,
        checkouts: Sequence[pygit2.Repository] | None = None,
        held: HeldIndexes | None = None,
    ) -> list[SyncReport]:
        """Bring ``paths`` in every checkout of ``ref`` to the branch tip, without losing work.

        A path is written only if the checkout still holds a version of it that the branch has had
        since ``base_commit`` (in both the work tree and the index): a fast-forward, as ``git
        merge --ff-only`` makes; anything else is the user's and is left alone, and reported.
        Each checkout's index is held locked from its read to its write (``journal``: where the
        lock is recorded first, see ``state.lockjournal``): ``held`` (see :meth:`holding`), or
        taken here. ``checkouts``: :meth:`checkouts_of` ``ref``, if the caller has them already.

        Raises:
            ApplyOnceError: the index stays locked, is a split index, a filter driver fails, or
                Git fails (:class:`CheckoutSyncError`): the sync is left for ``recover``.
        """
        tip = self.store.tip(ref)
        reports: list[SyncReport] = []
        paths = list(paths)
        for checkout in self.checkouts_of(ref) if checkouts is None else checkouts:
            try:
                locked = held.of(checkout) if held is not None else None
                if locked is not None and held is not None:
                    try:
                        report = self._sync_locked(checkout, locked, tip, base_commit, paths)
                    finally:
                        held.release(checkout)
                else:
                    with locked_index(checkout, journal, paths) as locked:
                        report = self._sync_locked(checkout, locked, tip, base_commit, paths)
            except pygit2.GitError as exc:
                raise CheckoutSyncError(
                    f"git failed updating the checkout at {checkout.workdir}: {exc}"
                ) from None
            reports.append(report)
        return reports

    def _sync_locked(
        self,
        checkout: pygit2.Repository,
        locked: LockedIndex,
        tip: str | None,
        base_commit: str | None,
        paths: list[str],
    ) -> SyncReport:
        """Sync one checkout whose index is ``locked``; its index is written once, if at all."""
        try:
            locked.cover(paths)
            report = self._sync_one(checkout, locked.index, tip, base_commit, paths)
            if report.written:
                locked.commit()
        except BaseException:
            locked.spoil()
            raise
        return report

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
        known = versions_since(self.store, tip, base_commit, paths)
        trusts_mode = trusts_filemode(checkout)
        written: list[str] = []
        left: list[str] = []
        skipped: list[_Skipped] = []
        # Everything that can fail on the user's setup (a clean or smudge filter) runs before the
        # first write: the sync writes all the paths it may write, or none.
        with lent(checkout, index):
            planned = self._plan_sync(checkout, index, tip_tree, known, paths, left, skipped)
        # The work tree is made durable before the index that describes it is written, and so
        # before the call's ``synced`` event: after a power cut, a file is its old bytes or its
        # new ones, never a lost rename or an empty file that the index calls synced (and that
        # recover would then leave as the user's). Each file is fsynced as it is written, each
        # directory whose names changed once, at the end.
        directories: set[Path] = set()
        for path, target, checked_out in skipped:
            if target[0] is None:
                index.remove(path)
            else:
                assert target[1] is not None
                stage_file(index, path, target[0], target[1], None)
            if checked_out:  # leaves the sparse checkout: git removes its file
                full = root / path
                remove_file(full)
                directories.add(full.parent)
                prune_empty_dirs(full.parent, root)
            written.append(path)
        for path, target, staged, current, data in planned:
            full = root / path
            if target[0] is None:
                remove_file(full)
                directories.add(full.parent)
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
                stage(index, full, path, target)
            else:
                entry = tip_tree.entry(path)
                assert entry is not None
                ensure_dir(full.parent, mode=WORKTREE_DIR)  # each directory it makes, durable
                directories.add(full.parent)
                if full.is_symlink():
                    full.unlink()  # a known version of the path: replaced, not written through
                if entry.filemode == MODE_LINK:
                    os.symlink(tip_tree.read(path)[0], full)
                else:
                    assert data is not None
                    atomic_write(
                        full,
                        data,
                        mode=file_mode(entry.filemode),
                        sync_dir=False,
                        before_replace=_during_sync,
                    )
                stage(index, full, path, target)
            written.append(path)
        for directory in sorted(directories):
            if directory.is_dir():  # (not one the deletion left empty and pruned)
                fsync_dir(directory)
        behind = tuple(p for p in left if index_version(index, p) != tip_tree.version(p))
        return SyncReport(str(root), tuple(written), tuple(left), behind=behind, since=base_commit)

    def _plan_sync(
        self,
        checkout: pygit2.Repository,
        index: pygit2.Index,
        tip_tree: GitTree,
        known: dict[str, set[Version]],
        paths: list[str],
        left: list[str],
        skipped: list[_Skipped],
    ) -> list[tuple[str, Version, Version, Version, bytes | None]]:
        """What the sync of one checkout writes: each path to bring to the tip, with its versions
        (target, staged, current) and the bytes to write. Appends the paths to leave alone to
        ``left``, the entries to keep out of the work tree (skip-worktree) to ``skipped``.

        In a sparse checkout, a path gets the skip-worktree bit and no file as ``git merge``
        gives it: when the sparse patterns leave it out (a path the branch adds there, or moves
        there, too), and a path they take in loses the bit and gets its file; without patterns
        (``git update-index --skip-worktree``), an entry keeps the bit it has."""
        root = Path(checkout.workdir)
        trusts_mode = trusts_filemode(checkout)
        autocrlf = autocrlf_of(checkout)
        sparse = sparse_checkout_of(checkout)
        planned: list[tuple[str, Version, Version, Version, bytes | None]] = []
        for path in paths:
            target = tip_tree.version(path)
            staged = index_version(index, path)
            was_skipped = _skips(sparse, index, root, path)
            excluded = sparse.excludes(path) if sparse is not None else None
            if excluded is None:
                excluded = was_skipped
            if was_skipped and (excluded or target[0] is None):
                # Out of the work tree, and stays out: git keeps only the index entry.
                if staged != target and staged in known[path]:
                    skipped.append((path, target, False))
                elif staged != target:
                    left.append(path)
                continue
            if was_skipped:
                # Comes into the sparse checkout: its file is written, where nothing is.
                current = workdir_version(checkout, root, path, staged, trusts_mode=trusts_mode)
                if current[0] is not None or staged not in known[path]:
                    left.append(path)
                    continue
            else:
                current = workdir_version(checkout, root, path, staged, trusts_mode=trusts_mode)
                if current == target and staged == target:
                    continue
                if current not in known[path] or staged not in known[path]:
                    left.append(path)
                    continue
            if not is_real_dir_chain(root, path):
                left.append(path)
                continue
            if excluded and target[0] is not None:
                # Left out of the work tree: the index entry alone, with the skip-worktree bit.
                # A file the branch had there goes (git removes it); one that is not the
                # index's (untracked, the new version already) stays, as git leaves it.
                skipped.append((path, target, current[0] is not None and staged[0] is not None))
                continue
            full = root / path
            if full.is_dir() and not full.is_symlink():
                left.append(path)
                continue
            data: bytes | None = None
            entry = tip_tree.entry(path) if target[0] is not None else None
            if entry is not None and entry.filemode != MODE_LINK:
                data = checkout_bytes(checkout, root, path, str(entry.id), autocrlf=autocrlf)
            planned.append((path, target, staged, current, data))
        return planned


def _blocker(index: pygit2.Index, root: Path, path: str) -> tuple[str, str] | None:
    """A folder of ``path`` that is something else in the checkout, and what: a file in the
    index (staged), or, in the work tree, an untracked file or symlink (writing below a
    symlink would write wherever it points). None: the path can be written as git would."""
    parts = path.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        folder = "/".join(parts[:depth])
        if index_version(index, folder)[0] is not None or is_unmerged(index, folder):
            return folder, "a staged file"
    found = blocking_parent(root, path)
    if found is None:
        return None
    what = "an untracked symbolic link" if (root / found).is_symlink() else "an untracked file"
    return found, what


def _catch_up_command(
    ref: str, own: Shown | None, base: str | None, local: str | None, remote: str | None
) -> str | None:
    """The commands that bring a checkout of ``ref`` that may show ``own`` (besides ``base``,
    the tip a call is judged on) up to ``base``, keeping the user's changes; None: none known.
    With a remote, a checkout that shows the local branch, which lags the remote's, pulls; a
    checkout that lags the local branch is first brought up to it."""
    branch = ref.removeprefix("refs/heads/")
    if own is None or not own.lags(base):
        return None
    if remote is not None and local is not None and local != base and own.since == local:
        return pull_command(remote, branch)
    shows: str | None = own.since if own.since != base else next(iter(own.tips), None)
    return keep_edits_command(branch, shows) if shows is not None else None


def _skips(sparse: SparseCheckout | None, index: pygit2.Index, root: Path, path: str) -> bool:
    """Whether git ignores the work tree at ``path`` (see :meth:`SparseCheckout.skips`; outside a
    sparse checkout, the entry's skip-worktree bit alone says)."""
    if sparse is None:
        return skips_worktree(index, path)
    return sparse.skips(index, root, path)


def _during_sync() -> None:
    fault("during-sync")
