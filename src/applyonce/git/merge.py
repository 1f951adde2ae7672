"""Line-level merges and the history of paths, for ``applyonce revert`` (through pygit2).

:func:`merge_blobs` is libgit2's three-way file merge (``git merge-file``): it merges when the two
sides changed different lines, and refuses (None) when they changed the same or adjacent lines.
Only text is merged: a blob with a NUL byte or bytes that are not UTF-8 is a conflict.
"""

from __future__ import annotations

import pygit2

from applyonce.git.history import later_changes
from applyonce.git.rereads import rereading
from applyonce.git.store import GitStore

MAX_NAMED = 5


@rereading
def merge_blobs(store: GitStore, path: str, ancestor: str, ours: str, theirs: str) -> bytes | None:
    """Merge the change ``ancestor`` → ``theirs`` into ``ours`` (blob IDs); None on a conflict."""
    repo = store.repo
    for oid in (ancestor, ours, theirs):
        blob = repo[oid]
        assert isinstance(blob, pygit2.Blob)
        data = blob.data
        # libgit2 hands the result back as a C string decoded as UTF-8: NUL would cut it short.
        if b"\x00" in data:
            return None
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None

    def entry(oid: str) -> pygit2.IndexEntry:
        return pygit2.IndexEntry(path, pygit2.Oid(hex=oid), pygit2.enums.FileMode.BLOB)

    result = repo.merge_file_from_index(entry(ancestor), entry(ours), entry(theirs))
    if not result.automergeable:
        return None
    return result.contents.encode("utf-8")


@rereading
def commits_changing(
    store: GitStore, tip: str | None, since: str, paths: set[str]
) -> list[tuple[str, str]]:
    """The commits after ``since`` up to ``tip`` that changed any of ``paths``, newest first (at
    most :data:`MAX_NAMED`): ``(commit ID, subject)``. The walk is a replay's
    (:func:`applyonce.git.history.later_changes`: bounded, path by path)."""
    if tip is None:
        return []
    later = later_changes(store, tip, since, paths, listed=MAX_NAMED).commits
    commits = [store.repo[c.commit].peel(pygit2.Commit) for c in later]
    return [(str(c.id), c.message.split("\n", 1)[0]) for c in commits]
