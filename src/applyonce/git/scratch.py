"""A scratch checkout: a private repository that borrows the main repository's objects.

``--check`` commands run in one (:mod:`applyonce.flow.call.checks` keeps the pool of slots and their
locks). It reads the objects through ``objects/info/alternates``, and its HEAD is the last tree it
held, so libgit2 checks out only what changed: after the first call, the cost follows the patch,
not the repository.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pygit2

from applyonce.git.rereads import Rereader, rereading
from applyonce.state.files import atomic_write, ensure_dir


class ScratchRepo:
    """The repository of one scratch slot at ``root`` (created on first use). ``prepare`` is
    told each tree before it is checked out, with the tree held until then (None: none): the
    place to fetch what a partial clone has not got (it reads through the alternates, which
    fetch nothing)."""

    def __init__(
        self,
        root: Path,
        objects_dir: Path,
        prepare: Callable[[str, str | None], None] | None = None,
    ) -> None:
        self.root = root
        self.prepare = prepare
        gitdir = root / ".git"
        if not (gitdir / "HEAD").exists():
            pygit2.init_repository(str(root))
        alternates = gitdir / "objects" / "info" / "alternates"
        if not alternates.exists() or alternates.read_text().strip() != str(objects_dir):
            ensure_dir(alternates.parent)
            atomic_write(alternates, f"{objects_dir}\n".encode())
        self.repo = pygit2.Repository(str(root))
        # It reads the main repository's packs through its alternates: where git replaced one
        # under a read, the checkout runs again on a fresh view of them (see git.rereads).
        self.rereader = Rereader(self.repo.free)

    @rereading
    def checkout(self, tree_id: str) -> None:
        """Make the work tree hold exactly ``tree_id``: nothing a previous check wrote is left,
        ignored build output included, so one call's output can never make another call's check
        pass."""
        self._unlock()
        if self.prepare is not None:
            held = None
            with contextlib.suppress(pygit2.GitError, KeyError, ValueError):
                held = str(self.repo.head.peel(pygit2.Tree).id)
            self.prepare(tree_id, held)
        tree = self.repo[tree_id]
        assert isinstance(tree, pygit2.Tree)
        # FORCE: tracked files a previous check changed are reset; REMOVE_UNTRACKED and
        # REMOVE_IGNORED: files a previous check created are removed, whether or not the tree's
        # .gitignore names them. libgit2 compares the work tree with its index (stat data), so
        # the files of the tree that did not change are neither read nor rewritten.
        strategy = (
            pygit2.enums.CheckoutStrategy.FORCE
            | pygit2.enums.CheckoutStrategy.REMOVE_UNTRACKED
            | pygit2.enums.CheckoutStrategy.REMOVE_IGNORED
        )
        try:
            self.repo.checkout_tree(tree, strategy=strategy)  # type: ignore[no-untyped-call]
        except pygit2.NotFoundError:
            # The tree HEAD held was a rejected call's, and 'git gc --prune=now' removed it:
            # forget it (an unborn HEAD) and check the whole tree out.
            self.repo.references.create("HEAD", "refs/heads/scratch-unborn", force=True)
            self.repo.checkout_tree(tree, strategy=strategy)  # type: ignore[no-untyped-call]
        sig = pygit2.Signature("applyonce", "applyonce@localhost", 0, 0)
        commit = self.repo.create_commit(None, sig, sig, "scratch", tree.id, [])
        self.repo.set_head(commit)

    def _unlock(self) -> None:
        """Remove the lock files a check or a hook left in the slot's repository (one killed in
        the middle of a 'git add' or 'git commit' of its own): the slot is this process's while
        it holds the slot's lock, and nothing it started still runs."""
        gitdir = self.root / ".git"
        for lock in (gitdir / "index.lock", gitdir / "HEAD.lock", *gitdir.glob("refs/**/*.lock")):
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()

    @contextlib.contextmanager
    def staged_on(self, ref: str, parent: str | None) -> Iterator[None]:
        """For the block, the checkout looks as a checkout does while ``git commit`` runs its
        hooks: HEAD on the branch ``ref`` at ``parent`` (unborn for None), the index and the work
        tree holding the tree being committed (the last :meth:`checkout`). After it, HEAD is the
        scratch commit again and the branch is gone (the next checkout starts from it)."""
        held = self.repo.head.target
        if parent is not None:
            self.repo.references.create(ref, parent, force=True)
        self.repo.set_head(ref)
        try:
            yield
        finally:
            self.repo.set_head(held)
            with contextlib.suppress(KeyError, pygit2.GitError):
                self.repo.references.delete(ref)

    def changed_from(self, tree_id: str) -> tuple[list[str], str]:
        """What was done to the checkout since it held ``tree_id``, as the ``pre-commit``
        framework sees it: the paths whose staged or tracked work-tree version differs from
        ``tree_id`` (an untracked or ignored new file is not a change), and their diff."""
        index = self.repo.index
        index.read(force=True)  # as the hook left it ('git add' included)
        try:
            # The tracked files as they are now (git diff: untracked files are not in it).
            for delta in index.diff_to_workdir().deltas:
                path = delta.old_file.path
                if delta.status == pygit2.enums.DeltaStatus.DELETED:
                    index.remove(path)
                else:
                    index.add(path)
            changed = index.write_tree()
        finally:
            index.read(force=True)  # nothing of this is kept
        if str(changed) == tree_id:
            return [], ""
        diff = (
            self.repo[tree_id].peel(pygit2.Tree).diff_to_tree(self.repo[changed].peel(pygit2.Tree))
        )
        paths = sorted({delta.new_file.path for delta in diff.deltas})
        return paths, diff.patch or ""


def is_repository(path: Path) -> bool:
    """Whether ``path`` opens as a Git repository (a broken scratch slot does not)."""
    try:
        pygit2.Repository(str(path))
    except (pygit2.GitError, KeyError):
        return False
    return True
