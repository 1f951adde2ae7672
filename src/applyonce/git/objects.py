"""The objects one call writes, kept until they are safely published.

A call's blobs, trees and commit are written into memory first (:class:`MemoryObjects`, an object
database backend in front of the repository's own), then reach the disk together as one pack
(:meth:`WrittenObjects.flush`, :mod:`applyonce.git.packs`): when the commit object is made, or
earlier when a check's scratch checkout must read the staged tree. A staging that is rejected
before either leaves nothing on disk at all.

They are unreachable until the publish moves the branch, and the user's housekeeping deletes
unreachable objects however young: ``git repack -a -d`` (``git gc``, ``git maintenance``) the
packs it listed, ``git prune --expire=now`` loose objects. So every object of the current staging
(those it made and those it reuses, already on disk) is written into a pack of the staging's own,
made with a ``.keep`` file before it appears (git neither deletes nor repacks a kept pack), and
the ``.keep`` is removed when the staging ends (:meth:`WrittenObjects.end`: published, or
abandoned). A commit is still published only when every object it adds over its parent is on
disk (:meth:`WrittenObjects.ensure_complete`): never a branch pointing at missing objects.

Writing objects on a full disk or a read-only file system is said for what it is
(:func:`writing_objects`): the call is rejected as retryable, with the cause.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pygit2

from applyonce.core.plan import MODE_GITLINK, MODE_TREE
from applyonce.errors import ApplyOnceError
from applyonce.git.packs import merge_small_packs, write_pack
from applyonce.git.rereads import Rereader, rereading
from applyonce.state.lockjournal import HeldKeep
from applyonce.state.storage import storage_cause


class ObjectsMissingError(ApplyOnceError):
    """Objects a commit needs are gone from the object database and cannot be rewritten."""

    kind = "objects-missing"
    default_retryable = True
    default_hint = "repeat the call (nothing was published)"


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


# Ahead of the repository's loose (1) and pack (2) backends: libgit2 writes an object into the
# first backend that can write, and reads from the first that has it.
MEMORY_PRIORITY = 1000


class MemoryObjects:
    """Objects in memory: where this process's stagings write their objects until they are
    flushed to the disk as one pack. Each object is kept while a staging holds it. A repository
    reads and writes them through a :class:`MemoryBackend` of its own (:meth:`backend`)."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[int, bytes]] = {}
        self._holders: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()

    def backend(self) -> MemoryBackend:
        """A new object database backend over these objects. New each time: libgit2 gives a
        backend to one object database for good, and a repository's is dropped and made again
        whenever its view of the packs is read afresh (:mod:`applyonce.git.rereads`)."""
        return MemoryBackend(self)

    def hold(self, oid: str) -> None:
        with self._lock:
            self._holders[oid] += 1

    def release(self, oids: Iterable[str]) -> None:
        """A staging is done with ``oids``: drop those no other staging holds."""
        with self._lock:
            for oid in oids:
                self._holders[oid] -= 1
                if self._holders[oid] <= 0:
                    del self._holders[oid]
                    self.objects.pop(oid, None)


class MemoryBackend(pygit2.OdbBackend):
    """An object database backend over :class:`MemoryObjects`: ahead of the repository's own
    (:data:`MEMORY_PRIORITY`), so that it holds every object the repository writes."""

    def __init__(self, memory: MemoryObjects) -> None:
        super().__init__()
        self.objects = memory.objects

    # libgit2's calls (a missing object is a KeyError: "not found" to libgit2)
    def read_cb(self, oid: str) -> tuple[int, bytes]:
        return self.objects[str(oid)]

    def read_prefix_cb(self, prefix: str) -> tuple[int, bytes, pygit2.Oid]:
        prefix = str(prefix)
        found = [oid for oid in list(self.objects) if oid.startswith(prefix)]
        if len(found) != 1:
            raise KeyError(prefix)
        return (*self.objects[found[0]], pygit2.Oid(hex=found[0]))

    def read_header_cb(self, oid: str) -> tuple[int, int]:
        kind, data = self.objects[str(oid)]
        return kind, len(data)

    def exists_cb(self, oid: str) -> bool:
        return str(oid) in self.objects

    def write_cb(self, oid: str, data: bytes, kind: int) -> None:
        self.objects[str(oid)] = (int(kind), bytes(data))

    def refresh_cb(self) -> None:
        return None


class WrittenObjects:
    """The raw objects written for the current staging, by ID, in the order written (blobs,
    trees bottom-up, the commit), and the kept packs they were flushed into."""

    def __init__(self, repo: pygit2.Repository, objects_dir: Path, rereader: Rereader) -> None:
        self.repo = repo
        self.objects_dir = objects_dir
        self.rereader = rereader  # the store's: reads outlast a repack (see git.rereads)
        # Where the .keep files are journaled and applyonce's packs recorded (None: neither;
        # a killed call's .keep then stays, and packs are never merged here).
        self.journal: Path | None = None
        self.registry: Path | None = None
        self._memory: MemoryObjects | None = None
        # A partial clone (set by the store): an object it has not got and this process did not
        # write is its remote's to give (fetched when read), not one a prune removed.
        self.partial_clone = False
        self._install_lock = threading.Lock()
        # Per thread: two calls staged at once in one process keep apart what each wrote.
        self._local = threading.local()

    def record_in(self, journal: Path, registry: Path) -> None:
        """Journal the ``.keep`` files in ``journal`` (so that ``recover`` can remove a killed
        call's), and record the packs written in ``registry`` (so that they can be merged)."""
        self.journal = journal
        self.registry = registry

    @property
    def _raw(self) -> dict[str, tuple[int, bytes]]:
        raw: dict[str, tuple[int, bytes]] | None = getattr(self._local, "raw", None)
        if raw is None:
            raw = self._local.raw = {}
        return raw

    @property
    def _packed(self) -> set[str]:
        """The objects of the current staging already in one of its kept packs."""
        packed: set[str] | None = getattr(self._local, "packed", None)
        if packed is None:
            packed = self._local.packed = set()
        return packed

    @property
    def _keeps(self) -> list[HeldKeep]:
        keeps: list[HeldKeep] | None = getattr(self._local, "keeps", None)
        if keeps is None:
            keeps = self._local.keeps = []
        return keeps

    def begin(self) -> None:
        """Objects written from now on go into memory until :meth:`flush` (installed on first
        use: a process that only reads never pays for the backend)."""
        if self._memory is None:
            with self._install_lock:
                if self._memory is None:
                    memory = MemoryObjects()
                    self.repo.odb.add_backend(memory.backend(), MEMORY_PRIORITY)
                    self._memory = memory

    def reinstall(self) -> None:
        """Put the memory backend back in front of the repository, whose object database was
        dropped (``Repository.free()``: its view of the packs is read afresh)."""
        if self._memory is not None:
            self.repo.odb.add_backend(self._memory.backend(), MEMORY_PRIORITY)

    def serve(self, repo: pygit2.Repository) -> None:
        """Put the memory backend in front of ``repo`` too (another repository of these objects:
        a checkout's), so that an object it writes goes into memory with the staging's own —
        and into the staging's kept pack — never into a loose file."""
        self.begin()
        assert self._memory is not None
        repo.odb.add_backend(self._memory.backend(), MEMORY_PRIORITY)

    def reset(self) -> None:
        """A new staging begins: the previous one ends (:meth:`end`)."""
        self.begin()
        self.end()

    def end(self) -> None:
        """The current staging is over — its commit published (the branch reaches its objects)
        or abandoned: its packs' ``.keep`` files are removed, making them git's to repack or
        prune, and its objects are forgotten here."""
        keeps, self._local.keeps = self._keeps, []
        self._local.packed = set()
        old = self._raw
        self._local.raw = {}
        if self._memory is not None and old:
            self._memory.release(old)
        for keep in keeps:
            keep.release()

    def _keep(self, oid: str, kind: int, data: bytes) -> None:
        if oid not in self._raw and self._memory is not None:
            self._memory.hold(oid)
        self._raw[oid] = (kind, data)

    def blob(self, oid: pygit2.Oid, data: bytes) -> pygit2.Oid:
        self._keep(str(oid), pygit2.enums.ObjectType.BLOB, data)
        return oid

    @rereading
    def remember(self, oid: pygit2.Oid) -> pygit2.Oid:
        """Keep the raw bytes of the object ``oid`` just written (or reused)."""
        kind, data = self.repo.odb.read(oid)
        self._keep(str(oid), kind, data)
        return oid

    def _disk_odb(self) -> pygit2.Odb:
        # A fresh object database: the repository's own caches objects it has read, and would
        # answer for an object that is no longer on disk.
        return pygit2.Odb(str(self.objects_dir))

    def flush(self) -> list[str]:
        """Make every object of the current staging durable on disk and safe from git's
        housekeeping: those not in one of its kept packs yet are written as one more, kept
        until :meth:`end`. Returns their IDs.

        Raises:
            ObjectStorageError: the disk is full or read-only.
        """
        todo = [oid for oid in self._raw if oid not in self._packed]
        if not todo:
            return []
        with writing_objects(self.objects_dir):
            written = write_pack(
                self.objects_dir,
                ((oid, *self._raw[oid]) for oid in todo),
                kept=True,
                journal=self.journal,
                registry=self.registry,
            )
            assert written is not None
            if written.keep is not None:
                self._keeps.append(written.keep)
            self._packed.update(todo)
            if self.registry is not None:
                with contextlib.suppress(OSError):
                    merge_small_packs(self.objects_dir, self.registry)
        return todo

    def ensure_readable(self) -> None:
        """Put back in memory what the current staging wrote and a concurrent prune removed
        from the disk since (libgit2 refuses a commit whose tree it cannot read)."""
        if self._memory is None:
            return
        for oid, value in self._raw.items():
            if oid not in self._memory.objects and oid not in self.repo.odb:
                self._memory.objects[oid] = value

    @rereading
    def ensure_complete(self, commit_id: str, *, down_to: str | None = PARENT) -> None:
        """Make sure the commit and every object it adds over its first parent are on disk:
        what this staging wrote is flushed into its kept packs first (``down_to``: the same for
        each commit on the first-parent chain down to this one, the ref's old tip).

        Raises:
            ObjectsMissingError: an object is gone and not known here (nothing is published).
        """
        self.flush()
        missing = self.missing(commit_id, down_to=down_to)
        if missing:
            raise ObjectsMissingError(
                f"commit {commit_id[:12]} needs {len(missing)} objects that are gone"
                f" (first {missing[0][:12]}; removed from the object database during the call)",
                commit=commit_id,
            )

    @rereading
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
        missing = [oid for one in chain for oid in self._missing_of(one)]
        if self.partial_clone:
            return [oid for oid in missing if oid in self._raw]
        return missing

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
