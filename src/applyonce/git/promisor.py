"""A partial clone's missing objects, fetched when they are read, as git fetches them.

A clone made with ``--filter=blob:none`` or ``--filter=tree:0`` has every commit, but only the
trees and blobs it checked out; git fetches any other one from the promisor remote the moment a
command reads it. libgit2 does not: it reports the object missing. :class:`PromisedObjects` is an
object database backend behind the repository's own: an object none of them has is read through
the real ``git cat-file --batch``, which fetches it from the promisor remote (one round trip; a
tree comes with its subtrees) and keeps it in the repository's objects, as any git command
reading it would. Nothing else changes: git's lazy fetch writes no ``FETCH_HEAD`` and moves no
ref.

Only a partial clone gets the backend (:func:`promisor_remote` names its remote). It fetches
only what is read, never what is merely looked for ("is X here?" stays a local question), and
only after libgit2 looked again at the packs on disk (a pack a fetch has just added holds most
of what is missing at first sight). What another repository is about to read through its
alternates (a check's scratch checkout) is fetched in one round trip first
(:meth:`PromisedObjects.prefetch`). A promisor remote that cannot be reached is an error of its own
(:class:`PromisedObjectUnavailableError`, exit 4), never a traceback.
"""

from __future__ import annotations

import threading

import pygit2

from applyonce.errors import ConflictError
from applyonce.git.gitcli import last_error, run_git

# Behind the repository's loose (1) and pack (2) backends: asked last.
PROMISOR_PRIORITY = 0
_TYPES = {
    b"commit": pygit2.enums.ObjectType.COMMIT,
    b"tree": pygit2.enums.ObjectType.TREE,
    b"blob": pygit2.enums.ObjectType.BLOB,
    b"tag": pygit2.enums.ObjectType.TAG,
}


class PromisedObjectUnavailableError(ConflictError):
    """An object a partial clone left on its promisor remote could not be fetched from it."""

    kind = "object-unavailable"
    default_retryable = True
    default_hint = (
        "this partial clone fetches the files it has not got from its remote when they are"
        " read: check that remote ('git fetch' shows the same), then repeat"
    )


def promisor_remote(repo: pygit2.Repository) -> str | None:
    """The remote a partial clone fetches its missing objects from (None: ``repo`` is not a
    partial clone): ``extensions.partialClone``, else the first remote with ``promisor``."""
    try:
        entries = [(str(e.name), str(e.value or "")) for e in repo.config]
    except (pygit2.GitError, KeyError, ValueError):
        return None
    for name, value in entries:
        if name.lower() == "extensions.partialclone" and value:
            return value
    for name, value in entries:
        low = name.lower()
        promised = value.lower() in ("true", "yes", "on", "1")
        if low.startswith("remote.") and low.endswith(".promisor") and promised:
            return name[len("remote.") : -len(".promisor")]
    return None


class PromisedObjects(pygit2.OdbBackend):
    """The object database backend of a partial clone's missing objects (module docstring)."""

    def __init__(self, git_dir: str, remote: str) -> None:
        super().__init__()
        self.git_dir = git_dir
        self.remote = remote
        # Per thread: whether libgit2 refreshed its view of the packs since this thread's last
        # read here (it does after every backend missed an object, then asks again).
        self._local = threading.local()

    # libgit2's calls (a missing object is a KeyError: "not found" to libgit2)
    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        if not getattr(self._local, "refreshed", False):
            raise KeyError(str(oid))  # first look at the packs on disk again
        self._local.refreshed = False
        return self._fetch(str(oid))

    def read_prefix_cb(self, prefix: str) -> tuple[int, bytes, pygit2.Oid]:
        raise KeyError(str(prefix))  # a short ID names an object that is here, or none

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        kind, data = self.read_cb(oid)
        return kind, len(data)

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return False  # "is it here?" never fetches

    def refresh_cb(self) -> None:
        self._local.refreshed = True

    def _fetch(self, oid: str) -> tuple[int, bytes]:
        """The object ``oid`` as git reads it (fetched from the promisor remote if need be).

        Raises:
            KeyError: the remote has no such object either.
            PromisedObjectUnavailableError: it could not be fetched (the remote is down).
        """
        done = run_git(self.git_dir, "cat-file", "--batch", input=f"{oid}\n".encode())
        header, _, rest = done.out.partition(b"\n")
        words = header.split()
        if done.code == 0 and len(words) == 3 and words[1] in _TYPES and words[0] == oid.encode():
            size = int(words[2])
            if len(rest) >= size:
                return int(_TYPES[words[1]]), bytes(rest[:size])
        reason = last_error(done.err)
        if done.code == 0 and ("not our ref" in reason or not reason):
            raise KeyError(oid)  # the remote does not have it either: missing
        raise PromisedObjectUnavailableError(
            f"cannot fetch object {oid[:12]} of this partial clone from its remote"
            + (f": {reason}" if reason else ""),
            object=oid,
        )

    def prefetch(self, oids: list[str]) -> None:
        """Fetch ``oids`` from the promisor remote in one round trip, as git's own lazy fetch
        does (a checkout of many files that are not here: one fetch, not one per file).

        Raises:
            PromisedObjectUnavailableError: the remote could not give them.
        """
        if not oids:
            return
        done = run_git(
            self.git_dir,
            "-c",
            "fetch.negotiationAlgorithm=noop",
            "fetch",
            self.remote,
            "--no-tags",
            "--no-write-fetch-head",
            "--recurse-submodules=no",
            "--filter=blob:none",
            "--stdin",
            input="".join(f"{oid}\n" for oid in oids).encode(),
        )
        if done.code != 0:
            reason = last_error(done.err)
            raise PromisedObjectUnavailableError(
                f"cannot fetch {len(oids)} objects of this partial clone from its remote"
                + (f": {reason}" if reason else ""),
            )
