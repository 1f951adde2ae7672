"""The repository as applyonce sees it: objects, trees, commits and history, through pygit2.

* blobs are read from the base commit, never from the user's checkout;
* the new tree is the base tree plus the changed paths only: cost O(patch · depth), not O(repo);
* the commit object is created without moving any ref (the ref moves in
  :mod:`applyonce.git.publisher`, the one commit point);
* libgit2's fsync of objects and refs is switched on when this package is imported.
* a read of objects that fails on a pack git's housekeeping replaced meanwhile runs again on
  a fresh view of the packs (:mod:`applyonce.git.rereads`).

Nothing outside :mod:`applyonce.git` sees a pygit2 object: commits are IDs (hex strings), a
commit's trailers a :class:`Trailers` mapping (read as ``git log`` reads them, not as libgit2
does: see :mod:`applyonce.core.trailers`), a diff a list of :class:`Change`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pygit2

from applyonce.core.paths import UnsafePathError
from applyonce.core.plan import MODE_GITLINK, MODE_LINK, MODE_TREE, EntryKind, TreePlan
from applyonce.core.trailers import Trailers, parse_trailers
from applyonce.errors import ApplyOnceError, ConflictError, UsageError
from applyonce.git.objects import WrittenObjects, writing_objects
from applyonce.git.promisor import PROMISOR_PRIORITY, PromisedObjects, promisor_remote
from applyonce.git.rereads import Rereader, rereading, unreadable_object

pygit2.settings.enable_fsync_gitdir(True)

TRAILER_CACHE = 4096  # commits whose parsed trailers are kept
FALLBACK_NAME = "applyonce"
FALLBACK_EMAIL = "applyonce@localhost"


class NotARepositoryError(ApplyOnceError):
    kind = "not-a-repository"
    exit_code = 2
    default_hint = "pass --repo with the path of a Git repository"


class UnreadableRepositoryError(UsageError):
    """Git cannot read the repository as it is (a broken config file, say)."""

    kind = "repository-unreadable"
    default_hint = "fix what the message names ('git status' shows the same), then repeat"


class UnsupportedObjectFormatError(UsageError):
    """The repository names its objects with SHA-256 (``git init --object-format=sha256``):
    libgit2, through which applyonce reads and writes every object, reads SHA-1 repositories
    only, so applyonce cannot open it, and writes nothing in it."""

    kind = "unsupported-object-format"
    default_hint = "nothing was written; use git itself there, or applyonce in a SHA-1 repository"


class LockedError(ConflictError):
    """A ref or index lock file is held longer than a writer should need."""

    kind = "locked"
    default_retryable = True
    default_hint = "if no git or applyonce process is running, run 'applyonce recover'"


@dataclass(frozen=True)
class Change:
    """One file change of a commit: ``status`` is git's letter (A, M, D, R, C, T)."""

    status: str
    path: str  # the new path (the old one for a deletion)
    old_path: str
    mode: int  # the new side's git file mode


@dataclass(frozen=True)
class RefMove:
    """One entry of a branch's reflog: from ``old`` (None: the branch was created) to ``new``,
    with the message of whatever moved it ("" when none was given, as by ``git update-ref``) and
    the time it was recorded."""

    old: str | None
    new: str
    message: str
    time: int


def moves_of(repo: pygit2.Repository, ref: str, limit: int) -> list[RefMove]:
    """The last ``limit`` moves of ``ref`` in ``repo``'s reflog, newest first (``HEAD`` of a
    linked work tree's repository: that work tree's own log). None: no reflog, or unreadable."""
    reference = repo.references.get(ref)
    if reference is None:
        return []
    moves: list[RefMove] = []
    with contextlib.suppress(pygit2.GitError, OSError, ValueError):
        for entry in reference.log():
            old = str(entry.oid_old)
            moves.append(
                RefMove(
                    None if not old.strip("0") else old,
                    str(entry.oid_new),
                    entry.message or "",
                    int(entry.committer.time),
                )
            )
            if len(moves) >= limit:
                break
    return moves


def _kind_of_mode(mode: int) -> EntryKind:
    if mode == MODE_TREE:
        return "dir"
    if mode == MODE_LINK:
        return "symlink"
    if mode == MODE_GITLINK:
        return "submodule"
    return "file"


class GitTree:
    """A :class:`applyonce.plan.TreeReader` over a commit's tree (None: an unborn branch).
    Its reads run under the store's :class:`~applyonce.git.rereads.Rereader`."""

    def __init__(
        self, repo: pygit2.Repository, tree: pygit2.Tree | None, rereader: Rereader
    ) -> None:
        self.repo = repo
        self.tree = tree
        self.rereader = rereader

    @rereading
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

    @rereading
    def read(self, path: str) -> tuple[bytes, int]:
        entry = self.entry(path)
        assert entry is not None, path
        blob = self.repo[entry.id]
        assert isinstance(blob, pygit2.Blob)
        return blob.data, entry.filemode

    @rereading
    def size(self, path: str) -> int:
        """The size of the file at ``path`` in bytes, read from its object's header (0: no file
        there)."""
        entry = self.entry(path)
        if entry is None or entry.filemode in (MODE_TREE, MODE_GITLINK):
            return 0
        return int(self.repo.odb.read_header(entry.id)[1])

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

    @rereading
    def listdir(self, path: str) -> list[tuple[str, EntryKind]]:
        """The names and kinds in the folder ``path`` (``""``: the root), in Git's order.

        Raises:
            KeyError: ``path`` is not a folder of the tree.
        """
        folder = self.tree if path == "" else self.entry(path)
        if not isinstance(folder, pygit2.Tree):
            raise KeyError(path)
        return [(str(entry.name), _kind_of_mode(entry.filemode)) for entry in folder]


# A version of a path as the checkout can hold it: (blob ID, git file mode); (None, None) is absent.
Version = tuple[str | None, int | None]


class GitStore:
    """One repository, as applyonce sees it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        found = pygit2.discover_repository(str(path))
        if found is None:
            raise NotARepositoryError(f"{path} is not inside a Git repository")
        try:
            self.repo = pygit2.Repository(found)
        except pygit2.GitError as exc:
            reason = str(exc).splitlines()[0]
            named = _OBJECT_FORMAT.search(reason)
            if named is not None:
                fmt = named.group(1)
                raise UnsupportedObjectFormatError(
                    f"{found.rstrip('/')} is a {_FORMAT_NAMES.get(fmt, fmt)} repository"
                    f" (extensions.objectFormat = {fmt}): libgit2, which applyonce uses, reads"
                    " SHA-1 repositories only",
                    object_format=fmt,
                ) from None
            # A typo in .git/config (git says 'fatal: bad config line'): the user's to fix.
            raise UnreadableRepositoryError(f"cannot open the repository: {reason}") from None
        self._comment_char: bytes | None = None
        self._trailer_cache: dict[str, Trailers] = {}
        # Reads again where git's housekeeping replaced a pack under a read.
        self.rereader = Rereader(self.reread_objects)
        # What the current staging wrote, to write again if a concurrent prune removes it.
        self.written = WrittenObjects(self.repo, self.objects_dir, self.rereader)
        # A partial clone's trees and blobs that are not here are fetched when read, as git
        # does (libgit2 does not).
        promisor = promisor_remote(self.repo)
        self._promised = PromisedObjects(self.repo.path, promisor) if promisor else None
        self.written.partial_clone = self._promised is not None
        self._install_backends()

    def _install_backends(self) -> None:
        # New backends each time: libgit2 gives a backend to one object database for good.
        if self._promised is not None:
            backend = PromisedObjects(self.repo.path, self._promised.remote)
            self.repo.odb.add_backend(backend, PROMISOR_PRIORITY)
        self.written.reinstall()

    def reread_objects(self) -> None:
        """Drop libgit2's view of the objects — the packs it listed, the multi-pack-index it
        read, the objects it parsed — so that the next read looks at the disk afresh (after git
        replaced packs under a read: :mod:`applyonce.git.rereads`). ``free`` drops the object
        database's added backends too: new ones are put in front."""
        self.repo.free()
        self._install_backends()

    def config_int(self, name: str) -> int | None:
        """Git config ``name`` as an integer, read as git reads one (``k``, ``m``, ``g``
        suffixes), or None when it is not set.

        Raises:
            ValueError: it is set, but not an integer.
        """
        try:
            return int(self.repo.config.get_int(name))
        except KeyError:
            return None
        except pygit2.GitError as exc:
            raise ValueError(str(exc)) from None

    # --- where things are -------------------------------------------------------------------

    @property
    def workdir(self) -> Path | None:
        return None if self.repo.is_bare else Path(self.repo.workdir)

    @functools.cached_property
    def common_dir(self) -> Path:
        """The repository's common directory, resolved (asked on every call: resolved once)."""
        gitdir = Path(self.repo.path)
        pointer = gitdir / "commondir"
        if pointer.is_file():
            return (gitdir / pointer.read_text().strip()).resolve()
        return gitdir.resolve()

    def worktree_roots(self) -> list[Path]:
        """The roots of every work tree of the repository (main and linked), as Git records
        them (not resolved)."""
        main = pygit2.Repository(str(self.common_dir))
        roots = [] if main.is_bare else [Path(main.workdir)]
        for name in main.list_worktrees():
            with contextlib.suppress(pygit2.GitError, KeyError):
                roots.append(Path(main.lookup_worktree(name).path))
        return roots

    def resolve_branch(self, branch: str | None) -> str:
        """``main`` -> ``refs/heads/main``; None -> the branch HEAD points at."""
        if branch is None:
            head = self.repo.references.get("HEAD")
            if head is None or head.type != pygit2.enums.ReferenceType.SYMBOLIC:
                raise UsageError("HEAD is detached", hint="pass --branch NAME")
            branch = str(head.target)
        ref = branch if branch.startswith("refs/") else f"refs/heads/{branch}"
        if (
            not ref.startswith("refs/heads/")
            or not ref.isprintable()
            or not _encodable(ref)
            or not pygit2.reference_is_valid_name(ref)
        ):
            raise UsageError(f"{branch!r} is not a valid branch name", hint="pass --branch NAME")
        # A symbolic branch (an alias of another) means the branch it points at.
        for _ in range(5):
            reference = self.repo.references.get(ref)
            if reference is None or reference.type != pygit2.enums.ReferenceType.SYMBOLIC:
                return ref
            ref = str(reference.target)
        raise UsageError(f"{branch!r} is a loop of symbolic refs")

    def branches(self, prefix: str) -> list[str]:
        """The branches whose ref starts with ``prefix`` (``refs/heads/agent/``), sorted."""
        return sorted(
            name for name in self.repo.references if name.startswith(prefix) and self.tip(name)
        )

    def head_is(self, ref: str) -> bool:
        """Whether HEAD points at ``ref`` (a branch that may not exist yet)."""
        head = self.repo.references.get("HEAD")
        return head is not None and str(head.target) == ref

    def tip(self, ref: str) -> str | None:
        reference = self.repo.references.get(ref)
        return None if reference is None else str(reference.resolve().target)

    def ref_moves(self, ref: str, limit: int) -> list[RefMove]:
        """The last ``limit`` moves of ``ref`` its reflog records, newest first (none: it has
        no reflog, e.g. ``core.logAllRefUpdates=false``, or cannot be read)."""
        return moves_of(self.repo, ref, limit)

    @rereading
    def resolve_commit(self, rev: str) -> str:
        """A revision (``HEAD~3``, a tag, an ID) as a commit ID."""
        try:
            obj = self.repo.revparse_single(rev).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            raise UsageError(f"{rev!r} is not a commit in this repository") from None
        return str(obj.id)

    @rereading
    def tree_at(self, commit_id: str | None) -> GitTree:
        if commit_id is None:
            return GitTree(self.repo, None, self.rereader)
        commit = self.repo[commit_id]
        assert isinstance(commit, pygit2.Commit)
        return GitTree(self.repo, commit.tree, self.rereader)

    # --- writing objects ----------------------------------------------------------------------

    @rereading
    def write_tree(
        self, base: GitTree, plan: TreePlan, *, fresh: bool = True
    ) -> tuple[str, dict[str, str]]:
        """Write the blobs and trees of ``plan`` on top of ``base`` (``fresh``: a new staging
        begins; False: it continues one, e.g. on a snapshot of the user's changes).

        Returns:
            The new root tree ID and the blob ID of every written path.
        """
        edits: dict[str, tuple[pygit2.Oid, int] | None] = {path: None for path in plan.removed}
        blobs: dict[str, str] = {}
        if fresh:
            self.written.reset()
        self.written.begin()
        with writing_objects(self.objects_dir):
            for change in plan.changes:
                if change.content is None:
                    edits[change.path] = None
                    continue
                oid = self.written.blob(self.repo.create_blob(change.content), change.content)
                edits[change.path] = (oid, change.mode)
                blobs[change.path] = str(oid)
            root = self._build(base.tree, edits)
            if root is None:
                # Every file removed: the empty tree. git reads it without it being on disk,
                # libgit2's on-disk checks do not: it is written into the staging's pack.
                root = self.written.remember(self.repo.TreeBuilder().write())
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
                    if unreadable_object(exc):
                        raise  # not the name: the object, which a repack hid (git.rereads)
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
        return self.written.remember(builder.write())

    @rereading
    def write_tree_of(self, base: GitTree, versions: Mapping[str, Version]) -> str:
        """Write the tree of ``base`` with each path of ``versions`` set to its version (the
        blob already written; ``(None, None)`` removes the path), as part of the current
        staging. Returns the new root tree ID."""
        edits: dict[str, tuple[pygit2.Oid, int] | None] = {}
        for path, (blob, mode) in versions.items():
            edits[path] = None if blob is None or mode is None else (pygit2.Oid(hex=blob), mode)
        self.written.begin()
        with writing_objects(self.objects_dir):
            root = self._build(base.tree, edits)
            if root is None:
                root = self.written.remember(self.repo.TreeBuilder().write())
        return str(root)

    def config_value(self, name: str) -> str | None:
        """``name`` (e.g. ``applyonce.leaseSeconds``) from the git config the repository sees —
        its own, the user's, the system's — or None. Where a patch cannot change it."""
        config = self.repo.config
        try:
            if name not in config:
                return None
            value = config[name]
            # A key written without '=' ('[applyonce] dirty') has no value: '' (not 'None'), so
            # the caller's refusal quotes what the user wrote.
            return "" if value is None else str(value)
        except (pygit2.GitError, KeyError, ValueError):
            return None

    def config_names(self, prefix: str) -> list[str]:
        """The names of the git config entries the repository sees that start with ``prefix``
        (compared case-insensitively, as git does), as git lists them: ``git config -l``'s."""
        folded = prefix.casefold()
        try:
            return [e.name for e in self.repo.config if e.name.casefold().startswith(folded)]
        except (pygit2.GitError, KeyError, ValueError):
            return []

    def config_bool(self, name: str) -> bool | None:
        """The boolean ``name`` (e.g. ``commit.gpgSign``) as git reads one (``true``, ``yes``,
        ``on``, ``1`` or the key alone; ``false``, ``no``, ``off``, ``0``, empty), None if unset.

        Raises:
            UsageError: its value is not a boolean (nothing is written).
        """
        config = self.repo.config
        try:
            if name not in config:
                return None
            return bool(config.get_bool(name))
        except (pygit2.GitError, KeyError, ValueError):
            value = self.config_value(name)
            raise UsageError(
                f"git config {name} is {value!r}, which is not true or false",
                hint=f"fix it with 'git config {name} true' (or false)",
            ) from None

    def config_values(self, name: str) -> list[str]:
        """Every value of the multi-valued ``name`` (e.g. ``applyonce.check``) in the git config
        the repository sees, in git's order (system, user, repository; none: [])."""
        try:
            return [str(v) for v in self.repo.config.get_multivar(name) if v is not None]
        except (pygit2.GitError, KeyError, ValueError):
            return []

    def signature(self, role: str = "COMMITTER") -> pygit2.Signature:
        """Who ``role`` (``AUTHOR`` or ``COMMITTER``) is, as git names them:
        ``GIT_<role>_NAME``/``GIT_<role>_EMAIL``, else ``user.name``/``user.email`` of the git
        config the repository sees, else applyonce's own identity (:meth:`has_identity` tells)."""
        return self._configured(role) or pygit2.Signature(FALLBACK_NAME, FALLBACK_EMAIL)

    def has_identity(self) -> bool:
        """Whether a commit made now is signed by a configured identity, not applyonce's own."""
        return self._configured("AUTHOR") is not None and self._configured("COMMITTER") is not None

    def _configured(self, role: str) -> pygit2.Signature | None:
        name = os.environ.get(f"GIT_{role}_NAME") or self.config_value("user.name")
        email = os.environ.get(f"GIT_{role}_EMAIL") or self.config_value("user.email")
        if not (name and email):
            return None
        try:
            return pygit2.Signature(name, email)
        except (ValueError, pygit2.GitError):  # a name libgit2 refuses (angle brackets)
            return None

    @rereading
    def create_commit(
        self,
        tree_id: str,
        parent: str | None,
        message: str,
        author: tuple[str, str, int | None, int] | None = None,
        sign: Callable[[str], str] | None = None,
        *,
        flush: bool = True,
    ) -> str:
        """Create the commit object, then write it and every object of the staging it needs to
        the disk, as one pack (:meth:`flush_objects`; ``flush`` False: kept in memory, for the
        publish to write with the commits chained on it). No ref moves. ``author``: name, address,
        time (None: now) and zone offset in minutes, as ``git am`` takes them from a mail;
        None: the repository's author. ``sign``: the armored signature of the commit's text
        (:meth:`applyonce.git.signing.Signer.sign`), carried in its ``gpgsig`` header as
        ``git commit -S`` writes it; if it raises, no commit object is written."""
        committer = self.signature()
        if author is None:
            author_sig = self.signature("AUTHOR")
        else:
            name, address, when, offset = author
            try:
                author_sig = (
                    pygit2.Signature(name, address)
                    if when is None
                    else pygit2.Signature(name, address, when, offset)
                )
            except (ValueError, pygit2.GitError):  # a name libgit2 refuses (angle brackets)
                author_sig = self.signature("AUTHOR")
        parents = [pygit2.Oid(hex=parent)] if parent else []
        self.written.begin()
        self.written.ensure_readable()  # libgit2 refuses a commit whose tree is missing
        with writing_objects(self.objects_dir):
            tree = pygit2.Oid(hex=tree_id)
            if sign is None:
                oid = self.repo.create_commit(None, author_sig, committer, message, tree, parents)
            else:
                # (pygit2's stubs say Oid; it returns the commit's text.)
                payload = str(
                    self.repo.create_commit_string(
                        author_sig, committer, message, tree, list[str | pygit2.Oid](parents)
                    )
                )
                oid = self.repo.create_commit_with_signature(payload, sign(payload))
        commit = str(self.written.remember(oid))
        if flush:
            self.flush_objects()
        return commit

    @rereading
    def commit_signature(self, commit_id: str) -> str | None:
        """The text of the commit's ``gpgsig`` header (its signature), or None if unsigned."""
        commit = self.repo[pygit2.Oid(hex=commit_id)]
        assert isinstance(commit, pygit2.Commit)
        signature, _ = commit.gpg_signature
        return None if signature is None else signature.decode("utf-8", "replace")

    def identity_commit(self, message: str) -> str:
        """A commit of the empty tree and no parent with ``message``, on disk (no ref moves)."""
        tree = self.write_tree_of(GitTree(self.repo, None, self.rereader), {})
        return self.create_commit(tree, None, message)

    def flush_objects(self) -> None:
        """Make every object the current staging wrote durable on disk (one pack), e.g. before
        another repository reads them (a check's scratch checkout, through its alternates).

        Raises:
            ObjectStorageError: the disk is full or read-only (nothing was published).
        """
        self.written.flush()

    # --- reading history ----------------------------------------------------------------------

    def commits(self, tip: str | None, *, hide: str | None = None) -> Iterator[pygit2.Commit]:
        """Commits reachable from ``tip`` and not from ``hide``, newest first (for this package;
        a walk that fails on a pack git replaced goes on where it was)."""
        if tip is None:
            return

        def walk() -> Iterator[pygit2.Commit]:
            walker = self.repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.TOPOLOGICAL)
            if hide is not None:
                with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
                    walker.hide(pygit2.Oid(hex=hide))
            return walker

        yield from self.rereader.iterate(walk, key=lambda commit: commit.id)

    def walk(self, tip: str | None, *, hide: str | None = None) -> Iterator[str]:
        """IDs of the commits reachable from ``tip`` and not from ``hide``, newest first."""
        for commit in self.commits(tip, hide=hide):
            yield str(commit.id)

    def walk_trailers(
        self, tip: str | None, *, hide: str | None = None, key: str | None = None
    ) -> Iterator[tuple[str, Trailers]]:
        """``(commit ID, trailers)`` of the commits :meth:`walk` gives, newest first. With
        ``key`` (``Call-Id``), a message that does not hold its bytes in any case cannot have
        that trailer, and gives no trailers without being parsed: a search in C instead of the
        trailer rules in Python, for each commit of a long history that carries none."""
        if key is None:
            for commit in self.commits(tip, hide=hide):
                yield str(commit.id), self._trailers(commit)
            return
        for commit_id, found in self.walk_naming(tip, key, hide=hide):
            yield commit_id, Trailers([]) if found is None else found

    def walk_naming(
        self, tip: str | None, key: str, *, hide: str | None = None
    ) -> Iterator[tuple[str, Trailers | None]]:
        """``(commit ID, trailers)`` of the commits :meth:`walk` gives, newest first; None for
        the trailers of a commit whose message does not hold ``key``'s bytes in any case (it
        cannot have that trailer, and is not parsed)."""
        named = _named(key)
        for commit in self.commits(tip, hide=hide):
            if named.search(commit.raw_message) is None:
                yield str(commit.id), None
            else:
                yield str(commit.id), self._trailers(commit)

    def commits_naming(
        self, tip: str | None, key: str, *, hide: str | None = None
    ) -> Iterator[str]:
        """IDs of the commits :meth:`walk` gives whose message holds ``key``'s bytes in any case
        (a superset of those with that trailer), found without parsing a message."""
        named = _named(key)
        for commit in self.commits(tip, hide=hide):
            if named.search(commit.raw_message) is not None:
                yield str(commit.id)

    @rereading
    def trailers_of(self, commit_id: str, *, key: str | None = None) -> Trailers:
        """The trailers of ``commit_id`` as ``git log --format=%(trailers)`` shows them (none
        for a commit without a trailer block; with ``key``, none for a message that does not
        hold its bytes, as in :meth:`walk_trailers`)."""
        commit = self.repo[commit_id]
        if not isinstance(commit, pygit2.Commit):
            return Trailers([])
        if key is not None and _named(key).search(commit.raw_message) is None:
            return Trailers([])
        return self._trailers(commit)

    def _trailers(self, commit: pygit2.Commit) -> Trailers:
        # A commit never changes: its trailers are parsed once (recover asks several times).
        oid = str(commit.id)
        cached = self._trailer_cache.get(oid)
        if cached is not None:
            return cached
        # git log skips the lines that start with core.commentChar, when reading trailers too.
        if self._comment_char is None:
            value = self.repo.config.get_multivar("core.commentChar")
            chars = [v for v in value if v is not None and len(v.encode()) == 1]
            self._comment_char = chars[-1].encode() if chars else b"#"
        found = parse_trailers(commit.raw_message, comment_char=self._comment_char)
        if len(self._trailer_cache) >= TRAILER_CACHE:
            self._trailer_cache.clear()
        self._trailer_cache[oid] = found
        return found

    @rereading
    def parent_of(self, commit_id: str) -> str | None:
        """The first parent of ``commit_id`` (None for a root commit)."""
        commit = self.repo[commit_id]
        assert isinstance(commit, pygit2.Commit)
        return str(commit.parent_ids[0]) if commit.parent_ids else None

    @rereading
    def parents_of(self, commit_id: str) -> list[str]:
        """Every parent of ``commit_id``, the first first (none for a root commit)."""
        commit = self.repo[commit_id]
        assert isinstance(commit, pygit2.Commit)
        return [str(parent) for parent in commit.parent_ids]

    @rereading
    def changes_in(self, parent: str | None, commit_id: str) -> list[Change]:
        """The file changes from ``parent`` (None: the empty tree) to ``commit_id``, renames
        detected."""
        new = self.repo[commit_id].peel(pygit2.Tree)
        if parent is None:
            diff = new.diff_to_tree(swap=True)
        else:
            diff = self.repo[parent].peel(pygit2.Tree).diff_to_tree(new)
        diff.find_similar()
        changes = []
        for delta in diff.deltas:
            status = delta.status_char()
            path = delta.old_file.path if status == "D" else delta.new_file.path
            changes.append(Change(status, path, delta.old_file.path, int(delta.new_file.mode)))
        return changes

    @rereading
    def paths_changed(self, parent: str | None, commit_id: str) -> set[str]:
        """Every path whose entry differs between ``parent`` (None: the empty tree) and
        ``commit_id``, both sides of a rename (no rename detection)."""
        new = self.repo[commit_id].peel(pygit2.Tree)
        if parent is None:
            diff = new.diff_to_tree(swap=True)
        else:
            diff = self.repo[parent].peel(pygit2.Tree).diff_to_tree(new)
        return {p for d in diff.deltas for p in (d.old_file.path, d.new_file.path)}

    @rereading
    def oldest_on(self, tip: str | None, commits: Sequence[str]) -> tuple[str | None, list[str]]:
        """The oldest of ``commits`` on the branch at ``tip``, and those of them not on it at
        all. Down its first parents from the tip, stopping at the last of them (only the
        commits above the oldest are read); only those not on that line are asked about one by
        one: on a side merged since, they count from where they parted from it (their merge
        base with it); not ancestors of the tip (the branch moved back, or to another line),
        they are returned apart. None: none of them is on it."""
        remaining = set(commits)
        if tip is None or not remaining:
            return None, sorted(remaining)
        oldest: str | None = None
        current: str | None = tip
        while current is not None and remaining:
            if current in remaining:
                oldest = current
                remaining.discard(current)
            commit = self.repo[current]
            assert isinstance(commit, pygit2.Commit)
            current = str(commit.parent_ids[0]) if commit.parent_ids else None
        if not remaining:
            return oldest, []
        apart = sorted(c for c in remaining if not self.is_ancestor(c, tip))
        merged = sorted(remaining.difference(apart))
        if not merged:
            return oldest, apart
        try:  # rare: one merge-base question for all the merged sides
            ids: list[str | pygit2.Oid] = [oldest or tip, *merged]
            found = self.repo.merge_base_octopus(ids)
        except (KeyError, ValueError, pygit2.GitError):
            return oldest, apart
        return (str(found) if found is not None else oldest), apart

    def has_object(self, oid: str) -> bool:
        return oid in self.repo

    # --- how much of the history is here ----------------------------------------------------

    def history_cuts(self) -> frozenset[str]:
        """The commits whose parents this repository does not show: the boundary of a shallow
        clone (``shallow``, as ``git clone --depth``/``git fetch --deepen`` leave it) and the
        commits of ``info/grafts`` (libgit2 reads both as the history). Read afresh each time: a
        ``git fetch --deepen`` or ``--unshallow`` in between changes them."""
        cuts: set[str] = set()
        for name, first_only in (("shallow", False), ("info/grafts", True)):
            try:
                text = (self.common_dir / name).read_text(encoding="ascii", errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                words = line.split()
                for word in words[:1] if first_only else words:
                    if re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", word):
                        cuts.add(word)
        return frozenset(cuts)

    def open_checkout(self, path: str) -> pygit2.Repository:
        """The repository of the work tree at ``path`` (one of this repository's), reading
        objects as this store does: a partial clone's missing ones are fetched when read."""
        repo = pygit2.Repository(path)
        if self._promised is not None:
            backend = PromisedObjects(self.repo.path, self._promised.remote)
            repo.odb.add_backend(backend, PROMISOR_PRIORITY)
        return repo

    @rereading
    def fetch_missing_blobs(self, tree_id: str, since: str | None) -> None:
        """Of a partial clone: fetch, in one round trip, the blobs of the tree ``tree_id`` that
        differ from the tree ``since`` (None: all of them) and are not here — before a checkout
        made by another repository reading these objects (a check's scratch checkout), which
        would find them missing. Nothing to do in a complete clone.

        Raises:
            PromisedObjectUnavailableError: the promisor remote could not give them.
        """
        if self._promised is None:
            return
        new = self.repo[tree_id].peel(pygit2.Tree)
        old = self.repo.get(since) if since is not None else None
        if isinstance(old, pygit2.Tree):
            diff = old.diff_to_tree(new)
        else:
            diff = new.diff_to_tree(swap=True)
        wanted = {
            str(delta.new_file.id)
            for delta in diff.deltas
            if delta.status_char() != "D" and delta.new_file.mode not in (0, MODE_GITLINK)
        }
        self._promised.prefetch(sorted(oid for oid in wanted if oid not in self.repo))

    def reread_history(self) -> None:
        """Read the history afresh after a fetch deepened it: libgit2 keeps the shallow
        boundary it read and the commits it parsed with their parents cut off, until its caches
        are dropped (:meth:`reread_objects`)."""
        self.reread_objects()
        self._trailer_cache.clear()

    def is_shallow(self) -> bool:
        """Whether this is a shallow clone (some commits' parents were never fetched)."""
        return (self.common_dir / "shallow").is_file()

    def hidden_below(self, tip: str | None, *, hide: str | None = None) -> list[str]:
        """The commits reachable from ``tip`` and not from ``hide`` below which history is
        missing here (:meth:`history_cuts`): empty when a walk of ``tip`` (down to ``hide``)
        sees every commit the branch has."""
        if tip is None:
            return []
        hidden = []
        for cut in sorted(self.history_cuts()):
            if not self.has_object(cut) or not self.is_ancestor(cut, tip):
                continue
            if hide is not None and self.has_object(hide) and self.is_ancestor(cut, hide):
                continue
            hidden.append(cut)
        return hidden

    @rereading
    def is_commit(self, oid: str) -> bool:
        """Whether ``oid`` names a commit of this repository (any other text: False)."""
        try:
            return isinstance(self.repo.get(oid), pygit2.Commit)
        except (ValueError, TypeError, pygit2.GitError):
            return False

    @rereading
    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        if ancestor == descendant:
            return True
        return bool(self.repo.descendant_of(pygit2.Oid(hex=descendant), pygit2.Oid(hex=ancestor)))

    @property
    def objects_dir(self) -> Path:
        """Where this repository's objects are (a linked work tree shares the main one's)."""
        objects = Path(self.repo.path).resolve() / "objects"
        return objects if objects.is_dir() else self.common_dir / "objects"


# libgit2's refusal of a repository whose objects are not named with SHA-1.
_OBJECT_FORMAT = re.compile(r"unknown object format '([A-Za-z0-9-]+)'")
_FORMAT_NAMES = {"sha256": "SHA-256"}


def _named(key: str) -> re.Pattern[bytes]:
    """A search for ``key``'s bytes in any case (a trailer token's case does not matter)."""
    return re.compile(re.escape(key.encode()), re.IGNORECASE)


def blob_id_of(data: bytes) -> str:
    """The Git blob ID ``data`` would have (nothing is written)."""
    return str(pygit2.hash(data))


def _encodable(name: str) -> bool:
    """Whether ``name`` is valid UTF-8 text (an argument that was not decodes to surrogates,
    which libgit2 cannot be given)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
