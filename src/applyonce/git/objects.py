"""The objects one call writes, kept until they are safely published.

A call's blobs, trees and commit are unreachable until the publish moves the branch, and
``git gc --prune=now`` or ``git prune`` delete unreachable objects however young. So the raw
bytes of everything written for the current staging are kept in memory (:class:`WrittenObjects`),
written back where a prune removed them, and a commit is published only when every object it
adds over its parent is on disk: never a branch pointing at missing objects.

Writing objects on a full disk or a read-only file system is said for what it is
(:func:`writing_objects`): the call is rejected as retryable, with the cause.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import pygit2

from applyonce.core.plan import MODE_GITLINK, MODE_TREE
from applyonce.errors import ApplyOnceError
from applyonce.state.storage import storage_cause


class ObjectsMissingError(ApplyOnceError):
    """Objects a commit needs are gone from the object database and cannot be rewritten."""

    kind = "objects-missing"
    default_retryable = True
    default_hint = (
        "repeat the call; do not run 'git gc --prune=now' or 'git prune' while applyonce runs"
    )


class ObjectStorageError(ApplyOnceError):
    """Git objects cannot be written: the disk is full or the file system read-only."""

    kind = "storage"
    default_retryable = True


@contextlib.contextmanager
def writing_objects(objects_dir: Path) -> Iterator[None]:
    """Turn a failed object write caused by the storage into :class:`ObjectStorageError`."""
    try:
        yield
    except (OSError, pygit2.GitError) as exc:
        # libgit2 reports ENOSPC as an OSError with no errno: the file system is asked then.
        known = isinstance(exc, OSError) and exc.errno is not None
        cause = storage_cause(objects_dir, exc if known else None)
        if cause is None:
            raise
        raise ObjectStorageError(
            f"cannot write Git objects in {objects_dir}: {cause} ({exc})",
            hint="free some space or make it writable, then repeat the call (nothing was"
            " committed)",
            cause=cause,
        ) from None


# ``down_to`` of :meth:`WrittenObjects.missing`: only the commit itself, over its first parent.
PARENT = "parent"
MAX_CHAIN = 4


class WrittenObjects:
    """The raw objects written for the current staging, by ID, in the order written (blobs,
    trees bottom-up, the commit)."""

    def __init__(self, repo: pygit2.Repository, objects_dir: Path) -> None:
        self.repo = repo
        self.objects_dir = objects_dir
        # Per thread: two calls staged at once in one process keep apart what each wrote.
        self._local = threading.local()

    @property
    def _raw(self) -> dict[str, tuple[int, bytes]]:
        raw: dict[str, tuple[int, bytes]] | None = getattr(self._local, "raw", None)
        if raw is None:
            raw = self._local.raw = {}
        return raw

    def reset(self) -> None:
        """A new staging begins: forget the previous one's objects."""
        self._local.raw = {}

    def blob(self, oid: pygit2.Oid, data: bytes) -> pygit2.Oid:
        self._raw[str(oid)] = (pygit2.enums.ObjectType.BLOB, data)
        return oid

    def remember(self, oid: pygit2.Oid) -> pygit2.Oid:
        """Keep the raw bytes of the object ``oid`` just written."""
        kind, data = self.repo.odb.read(oid)
        self._raw[str(oid)] = (kind, data)
        return oid

    def _disk_odb(self) -> pygit2.Odb:
        # A fresh object database: the repository's own caches objects it has read, and would
        # answer for an object that is no longer on disk.
        return pygit2.Odb(str(self.objects_dir))

    def restore(self) -> list[str]:
        """Write back the objects a concurrent prune removed. Returns their IDs."""
        if not self._raw:
            return []
        odb = self._disk_odb()
        missing = [oid for oid in self._raw if oid not in odb]
        with writing_objects(self.objects_dir):
            for oid in missing:
                kind, data = self._raw[oid]
                written = self.repo.odb.write(kind, data)
                assert str(written) == oid, (written, oid)
        return missing

    def ensure_complete(self, commit_id: str, *, down_to: str | None = PARENT) -> None:
        """Make sure the commit and every object it adds over its first parent are on disk,
        writing back what this process wrote and a prune removed (``down_to``: the same for
        each commit on the first-parent chain down to this one, the ref's old tip).

        Raises:
            ObjectsMissingError: an object is gone and not known here (nothing is published).
        """
        self.restore()
        missing = self.missing(commit_id, down_to=down_to)
        if missing:
            raise ObjectsMissingError(
                f"commit {commit_id[:12]} needs {len(missing)} objects that are gone"
                f" (first {missing[0][:12]}; a concurrent 'git gc --prune=now'?)",
                commit=commit_id,
            )

    def missing(self, commit_id: str, *, down_to: str | None = PARENT) -> list[str]:
        """The objects the commit needs beyond its first parent's tree that are not on disk:
        the commit, its tree, and the trees and blobs that differ from the parent's (cost:
        the changed paths, not the repository). ``down_to``: also those of the commits on its
        first-parent chain down to that one (a call's commit on the snapshot of the user's
        changes publishes both), at most :data:`MAX_CHAIN` commits."""
        chain = [commit_id]
        if down_to != PARENT:
            while len(chain) < MAX_CHAIN and chain[-1] in self.repo:
                commit = self.repo[chain[-1]]
                assert isinstance(commit, pygit2.Commit)
                parent = str(commit.parent_ids[0]) if commit.parent_ids else None
                if parent is None or parent == down_to:
                    break
                chain.append(parent)
        return [oid for one in chain for oid in self._missing_of(one)]

    def _missing_of(self, commit_id: str) -> list[str]:
        odb = self._disk_odb()
        if commit_id not in odb:
            return [commit_id]
        commit = self.repo[commit_id]
        assert isinstance(commit, pygit2.Commit)
        parents = commit.parent_ids
        base = str(self.repo[parents[0]].peel(pygit2.Tree).id) if parents else None
        missing: list[str] = []
        self._missing_below(odb, str(commit.tree_id), base, missing)
        return missing

    def _missing_below(
        self, odb: pygit2.Odb, tree_id: str, base_id: str | None, missing: list[str]
    ) -> None:
        if tree_id == base_id:
            return
        if tree_id not in odb:
            missing.append(tree_id)
            return
        tree = self.repo[tree_id]
        base = self.repo[base_id] if base_id is not None else None
        assert isinstance(tree, pygit2.Tree)
        for entry in tree:
            old = _child(base, entry.name or "")
            if old is not None and old.id == entry.id:
                continue
            if entry.filemode == MODE_TREE:
                old_tree = str(old.id) if old is not None and old.filemode == MODE_TREE else None
                self._missing_below(odb, str(entry.id), old_tree, missing)
            elif entry.filemode != MODE_GITLINK and str(entry.id) not in odb:
                missing.append(str(entry.id))


def _child(tree: pygit2.Object | None, name: str) -> pygit2.Object | None:
    if not isinstance(tree, pygit2.Tree):
        return None
    try:
        return tree[name]
    except KeyError:
        return None
