"""The Git edge: the only module that writes Git objects, refs or the index (through pygit2).

* blobs are read from the base commit, never from the user's checkout;
* the new tree is the base tree plus the changed paths only: cost O(patch · depth), not O(repo);
* the commit object is created without moving any ref;
* ``publish`` is the single commit point of a call: a compare-and-swap of ``refs/heads/<branch>``
  from ``base_commit`` to the new commit (libgit2 checks the old value under the ref's lock);
* libgit2's fsync of objects and refs is switched on when this module is imported.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pygit2

from applyonce.errors import ApplyOnceError, ConflictError, UsageError
from applyonce.fsutil import atomic_write, is_real_dir_chain, prune_empty_dirs, remove_file
from applyonce.paths import UnsafePathError
from applyonce.plan import (
    MODE_EXEC,
    MODE_FILE,
    MODE_GITLINK,
    MODE_LINK,
    MODE_TREE,
    EntryKind,
    TreePlan,
)

pygit2.settings.enable_fsync_gitdir(True)

FALLBACK_NAME = "applyonce"
FALLBACK_EMAIL = "applyonce@localhost"
_LOCK_RETRIES = 50
_ZERO_OID = pygit2.Oid(hex="0" * 40)
_INDEX_LOCK_RETRIES = 20


class NotARepositoryError(ApplyOnceError):
    kind = "not-a-repository"
    exit_code = 2
    default_hint = "pass --repo with the path of a Git repository"


class TipMovedError(ConflictError):
    """The branch tip is no longer the base the call was staged on."""

    kind = "tip-moved"
    default_retryable = True

    def __init__(self, ref: str, expected: str | None, actual: str | None) -> None:
        super().__init__(
            f"{ref} moved from {str(expected)[:12]} to {str(actual)[:12]} during the call",
            ref=ref,
            expected=expected,
            actual=actual,
        )
        self.actual = actual


class LockedError(ConflictError):
    """A ref or index lock file is held longer than a writer should need."""

    kind = "locked"
    default_retryable = True
    default_hint = "if no git or applyonce process is running, run 'applyonce recover'"


class DirtyPathError(ConflictError):
    """A path the patch touches has uncommitted changes (or is untracked) in the checkout."""

    kind = "dirty-path"
    default_retryable = True
    default_hint = "commit or stash your changes to it, then repeat the call"


def _kind_of_mode(mode: int) -> EntryKind:
    if mode == MODE_TREE:
        return "dir"
    if mode == MODE_LINK:
        return "symlink"
    if mode == MODE_GITLINK:
        return "submodule"
    return "file"


class GitTree:
    """A :class:`applyonce.plan.TreeReader` over a commit's tree (None: an unborn branch)."""

    def __init__(self, repo: pygit2.Repository, tree: pygit2.Tree | None) -> None:
        self.repo = repo
        self.tree = tree

    def entry(self, path: str) -> pygit2.Object | None:
        if self.tree is None:
            return None
        try:
            return self.tree[path]
        except KeyError:
            return None

    def kind(self, path: str) -> EntryKind | None:
        entry = self.entry(path)
        return None if entry is None else _kind_of_mode(entry.filemode)

    def read(self, path: str) -> tuple[bytes, int]:
        entry = self.entry(path)
        assert entry is not None, path
        blob = self.repo[entry.id]
        assert isinstance(blob, pygit2.Blob)
        return blob.data, entry.filemode

    def blob_id(self, path: str) -> str | None:
        entry = self.entry(path)
        if entry is None or entry.filemode in (MODE_TREE, MODE_GITLINK):
            return None
        return str(entry.id)

    def version(self, path: str) -> Version:
        """The path's blob ID and mode ((None, None): no file there)."""
        blob = self.blob_id(path)
        entry = self.entry(path)
        return (blob, entry.filemode if blob is not None and entry is not None else None)


# A version of a path as the checkout can hold it: (blob ID, git file mode); (None, None) is absent.
Version = tuple[str | None, int | None]


@dataclass(frozen=True)
class SyncReport:
    """What the checkout sync did."""

    worktree: str | None
    written: tuple[str, ...] = ()
    left_alone: tuple[str, ...] = ()
    failed: str | None = None  # why the sync could not run (it is retried by 'applyonce recover')


class GitStore:
    """One repository, as applyonce sees it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        found = pygit2.discover_repository(str(path))
        if found is None:
            raise NotARepositoryError(f"{path} is not inside a Git repository")
        self.repo = pygit2.Repository(found)

    # --- where things are -------------------------------------------------------------------

    @property
    def workdir(self) -> Path | None:
        return None if self.repo.is_bare else Path(self.repo.workdir)

    @property
    def common_dir(self) -> Path:
        gitdir = Path(self.repo.path)
        pointer = gitdir / "commondir"
        if pointer.is_file():
            return (gitdir / pointer.read_text().strip()).resolve()
        return gitdir.resolve()

    def resolve_branch(self, branch: str | None) -> str:
        """``main`` -> ``refs/heads/main``; None -> the branch HEAD points at."""
        if branch is None:
            head = self.repo.references.get("HEAD")
            if head is None or head.type != pygit2.enums.ReferenceType.SYMBOLIC:
                raise UsageError("HEAD is detached", hint="pass --branch NAME")
            branch = str(head.target)
        ref = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
        if not ref.startswith("refs/heads/") or not pygit2.reference_is_valid_name(ref):
            raise UsageError(f"{branch!r} is not a valid branch name", hint="pass --branch NAME")
        # A symbolic branch (an alias of another) means the branch it points at.
        for _ in range(5):
            reference = self.repo.references.get(ref)
            if reference is None or reference.type != pygit2.enums.ReferenceType.SYMBOLIC:
                return ref
            ref = str(reference.target)
        raise UsageError(f"{branch!r} is a loop of symbolic refs")

    def tip(self, ref: str) -> str | None:
        reference = self.repo.references.get(ref)
        return None if reference is None else str(reference.resolve().target)

    def resolve_commit(self, rev: str) -> str:
        """A revision (``HEAD~3``, a tag, an ID) as a commit ID."""
        try:
            obj = self.repo.revparse_single(rev).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            raise UsageError(f"{rev!r} is not a commit in this repository") from None
        return str(obj.id)

    def tree_at(self, commit_id: str | None) -> GitTree:
        if commit_id is None:
            return GitTree(self.repo, None)
        commit = self.repo[commit_id]
        assert isinstance(commit, pygit2.Commit)
        return GitTree(self.repo, commit.tree)

    # --- writing objects ----------------------------------------------------------------------

    def write_tree(self, base: GitTree, plan: TreePlan) -> tuple[str, dict[str, str]]:
        """Write the blobs and trees of ``plan`` on top of ``base``.

        Returns:
            The new root tree ID and the blob ID of every written path.
        """
        edits: dict[str, tuple[pygit2.Oid, int] | None] = {path: None for path in plan.removed}
        blobs: dict[str, str] = {}
        for change in plan.changes:
            if change.content is None:
                edits[change.path] = None
                continue
            oid = self.repo.create_blob(change.content)
            edits[change.path] = (oid, change.mode)
            blobs[change.path] = str(oid)
        root = self._build(base.tree, edits)
        if root is None:
            root = self.repo.TreeBuilder().write()
        return str(root), blobs

    def _build(
        self, tree: pygit2.Tree | None, edits: dict[str, tuple[pygit2.Oid, int] | None]
    ) -> pygit2.Oid | None:
        builder = self.repo.TreeBuilder(tree) if tree is not None else self.repo.TreeBuilder()
        below: dict[str, dict[str, tuple[pygit2.Oid, int] | None]] = {}
        for path, value in edits.items():
            head, _, rest = path.partition("/")
            if rest:
                below.setdefault(head, {})[rest] = value
            elif value is None:
                if builder.get(head) is not None:
                    builder.remove(head)
            else:
                try:
                    builder.insert(head, value[0], value[1])
                except (pygit2.GitError, ValueError) as exc:
                    # libgit2 refuses names git itself would refuse (NTFS and HFS tricks, ...).
                    raise UnsafePathError(
                        f"{head!r} is not a valid file name in a Git tree ({exc})", path=head
                    ) from None
        for head, sub in below.items():
            existing = builder.get(head)
            subtree = None
            if existing is not None and existing.filemode == MODE_TREE:
                obj = self.repo[existing.id]
                assert isinstance(obj, pygit2.Tree)
                subtree = obj
            new = self._build(subtree, sub)
            if new is None:
                if existing is not None:
                    builder.remove(head)
            else:
                builder.insert(head, new, MODE_TREE)
        if len(builder) == 0:
            return None
        return builder.write()

    def signature(self) -> pygit2.Signature:
        try:
            return self.repo.default_signature
        except (KeyError, pygit2.GitError):
            return pygit2.Signature(FALLBACK_NAME, FALLBACK_EMAIL)

    def create_commit(self, tree_id: str, parent: str | None, message: str) -> str:
        """Create the commit object. No ref moves."""
        sig = self.signature()
        parents = [pygit2.Oid(hex=parent)] if parent else []
        oid = self.repo.create_commit(None, sig, sig, message, pygit2.Oid(hex=tree_id), parents)
        return str(oid)

    # --- the commit point ---------------------------------------------------------------------

    def publish(self, ref: str, base: str | None, new: str, *, reason: str) -> None:
        """Move ``ref`` from ``base`` to ``new`` by compare-and-swap.

        Raises:
            TipMovedError: the ref is not at ``base`` (another writer got there first).
        """
        for attempt in range(_LOCK_RETRIES):
            current_tip = self.tip(ref)
            if current_tip != base:
                raise TipMovedError(ref, base, current_tip)
            try:
                if base is None:
                    if self.repo.references.get(ref) is not None:
                        raise TipMovedError(ref, None, self.tip(ref))
                    self.repo.create_reference_direct(
                        ref, pygit2.Oid(hex=new), False, message=reason
                    )
                    return
                current = self.repo.references.get(ref)
                if current is None or str(current.target) != base:
                    raise TipMovedError(ref, base, None if current is None else str(current.target))
                # set_target passes the value read above to libgit2 as the expected old value,
                # checked under the ref's lock: a writer between the read and here makes it fail.
                current.set_target(pygit2.Oid(hex=new), reason)
                return
            except (pygit2.GitError, OSError, KeyError) as exc:
                text = str(exc)
                now_at = self.tip(ref)
                if now_at != base:  # moved or deleted under us: the CAS did its job
                    raise TipMovedError(ref, base, now_at) from None
                if "lock" not in text:
                    raise
                if attempt + 1 < _LOCK_RETRIES:
                    time.sleep(0.01 * (attempt + 1))
                    continue
                raise LockedError(
                    f"{ref} stays locked by another writer ({text.strip()})"
                ) from None

    # --- reading history ----------------------------------------------------------------------

    def walk(self, tip: str | None, *, hide: str | None = None) -> Iterator[pygit2.Commit]:
        """Commits reachable from ``tip`` and not from ``hide``, newest first."""
        if tip is None:
            return
        walker = self.repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TOPOLOGICAL)
        if hide is not None:
            with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
                walker.hide(pygit2.Oid(hex=hide))
        yield from walker

    def commits_with_call_id(self, ref: str, call_id: str, *, since: str | None) -> list[str]:
        """Commits on ``ref`` after ``since`` whose ``Call-Id`` trailer is ``call_id``."""
        return [
            str(commit.id)
            for commit in self.walk(self.tip(ref), hide=since)
            if trailers(commit).get("Call-Id") == call_id
        ]

    def changes_in(self, parent: str | None, commit_id: str) -> list[pygit2.DiffDelta]:
        """The file changes from ``parent`` (None: the empty tree) to ``commit_id``, renames
        detected."""
        new = self.repo[commit_id].peel(pygit2.Tree)
        if parent is None:
            diff = new.diff_to_tree(swap=True)
        else:
            diff = self.repo[parent].peel(pygit2.Tree).diff_to_tree(new)
        diff.find_similar()
        return list(diff.deltas)

    def has_object(self, oid: str) -> bool:
        return oid in self.repo

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            return True
        return bool(self.repo.descendant_of(pygit2.Oid(hex=descendant), pygit2.Oid(hex=ancestor)))

    # --- the user's checkout ------------------------------------------------------------------

    def checkouts_of(self, ref: str) -> list[pygit2.Repository]:
        """The work trees (main and linked, from wherever we were opened) whose HEAD is ``ref``."""
        found: list[pygit2.Repository] = []
        candidates: list[pygit2.Repository] = []
        seen: set[str] = set()
        main = pygit2.Repository(str(self.common_dir))
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
        """
        for checkout in self.checkouts_of(ref):
            root = Path(checkout.workdir)
            index = checkout.index
            index.read(False)
            trusts_mode = _trusts_filemode(checkout)
            for path in paths:
                if base.kind(path) in ("dir", "submodule"):
                    continue  # not a file: the planner refuses the operation itself
                expected = base.version(path)
                staged = _index_version(index, path)
                current = _workdir_version(checkout, root, path, staged, trusts_mode=trusts_mode)
                if current != expected or staged != expected:
                    state = "is untracked" if expected[0] is None else "has uncommitted changes"
                    raise DirtyPathError(
                        f"{path} {state} in the checkout at {root}", path=path, worktree=str(root)
                    )

    def sync_checkouts(
        self, ref: str, base_commit: str | None, paths: Iterable[str]
    ) -> list[SyncReport]:
        """Bring ``paths`` in every checkout of ``ref`` to the branch tip, without losing work.

        A path is written only if the checkout still holds a version of it that the branch has had
        since ``base_commit`` (in both the work tree and the index); anything else is the user's
        and is left alone, and reported.
        """
        tip = self.tip(ref)
        reports: list[SyncReport] = []
        paths = list(paths)
        for checkout in self.checkouts_of(ref):
            root = Path(checkout.workdir)
            tip_tree = self.tree_at(tip)
            known = self._versions_since(tip, base_commit, paths)
            written: list[str] = []
            left: list[str] = []
            index = checkout.index
            index.read(False)
            trusts_mode = _trusts_filemode(checkout)
            for path in paths:
                target = tip_tree.version(path)
                staged = _index_version(index, path)
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
                    _stage(index, path, target)
                else:
                    entry = tip_tree.entry(path)
                    assert entry is not None
                    full.parent.mkdir(parents=True, exist_ok=True)
                    if full.is_symlink():
                        full.unlink()  # a known version of the path: replaced, not written through
                    if entry.filemode == MODE_LINK:
                        link = self.repo[entry.id]
                        assert isinstance(link, pygit2.Blob)
                        os.symlink(link.data, full)
                    else:
                        blob = self.repo[entry.id]
                        assert isinstance(blob, pygit2.Blob)
                        # Through the repo's filters (eol, .gitattributes), as git would write it.
                        with pygit2.BlobIO(blob, as_path=path) as stream:
                            data = stream.read()
                        atomic_write(full, data, mode=_file_mode(entry.filemode), durable=False)
                    _stage(index, path, target)
                written.append(path)
            if written:
                _write_index(index)
            reports.append(SyncReport(str(root), tuple(written), tuple(left)))
        return reports

    def _versions_since(
        self, tip: str | None, base_commit: str | None, paths: list[str]
    ) -> dict[str, set[Version]]:
        """Every version (blob ID and mode) each path had from ``base_commit`` to ``tip``: its
        version at the base plus every version a commit in between introduced (one tree diff a
        commit, so the cost follows the changes, not commits x paths)."""
        base_tree = self.tree_at(base_commit)
        versions: dict[str, set[Version]] = {path: {base_tree.version(path)} for path in paths}
        for commit in self.walk(tip, hide=base_commit):
            if not commit.parents:  # a root commit: its versions are simply its own
                root = GitTree(self.repo, commit.tree)
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
            return None if not full.exists() else "directory"
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


def _stage(index: pygit2.Index, path: str, target: Version) -> None:
    """Record the work tree's ``path`` in the index with ``target``'s mode.

    Adding by path takes the blob and the stat data from the file, and the mode from the file too,
    except under ``core.fileMode=false``: there libgit2 keeps the mode of the entry it replaces. So
    the entry is first written with the commit's mode, then added by path."""
    blob, mode = target
    assert blob is not None and mode is not None
    index.add(pygit2.IndexEntry(path, pygit2.Oid(hex=blob), pygit2.enums.FileMode(mode)))
    index.add(path)


def _file_mode(git_mode: int) -> int:
    """Permission bits for a checkout file, as git would give them under the user's umask."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if git_mode == MODE_EXEC else 0o666) & ~umask


def _write_index(index: pygit2.Index) -> None:
    # The user's own git holds index.lock only briefly; wait about a second, then give up (the
    # sync is retried by 'applyonce recover').
    for attempt in range(_INDEX_LOCK_RETRIES):
        try:
            index.write()
            return
        except (pygit2.GitError, OSError) as exc:
            if "lock" not in str(exc):
                raise
            if attempt + 1 < _INDEX_LOCK_RETRIES:
                time.sleep(0.05)
                continue
            raise LockedError(f"the index stays locked by another writer ({exc})") from None


def blob_id_of(data: bytes) -> str:
    """The Git blob ID ``data`` would have (nothing is written)."""
    return str(pygit2.hash(data))


def trailers(commit: pygit2.Commit) -> dict[str, str]:
    """The commit's trailer block, as git parses it."""
    try:
        return dict(commit.message_trailers)
    except (pygit2.GitError, ValueError):
        return {}
