"""Every version a checkout may hold of some paths: what the branch had of them since a base.

The checkout sync (:mod:`applyonce.git.checkouts`) writes a path only where the checkout holds
one of these versions (anything else is the user's). They are found by comparing each commit
from the base to the tip with its first parent along the paths only, descending into a folder
only where its tree changed: the cost follows what the commits changed on the way to the paths,
never the size of the tree, and not commits x paths (``recover`` syncs hundreds of calls at once).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import pygit2

from applyonce.core.plan import MODE_GITLINK, MODE_TREE
from applyonce.git.rereads import rereading
from applyonce.git.store import GitStore, Version


@rereading
def versions_since(
    store: GitStore,
    tip: str | None,
    base_commit: str | None,
    paths: list[str],
    *,
    also: Sequence[str] = (),
) -> dict[str, set[Version]]:
    """Every version (blob ID and mode) each path had from ``base_commit`` to ``tip``: its
    version at the base plus its version in every commit in between (and in a first parent
    outside that range: a merged side's), and its version in each commit of ``also`` (tips a
    checkout may show that are not on the way: a branch moved back, or to another line).
    Each commit is compared with its first parent along the paths only, descending into a
    folder only where its tree changed: the cost follows what the commits changed on the way
    to the paths, never the size of the tree, and not commits x paths."""
    versions: dict[str, set[Version]] = {path: set() for path in paths}
    trie = _trie(paths)
    _record_all(store.tree_at(base_commit).tree, trie, "", versions)
    for shown in also:
        _record_all(store.tree_at(shown).tree, trie, "", versions)
    if tip is None:
        return versions
    walker = store.repo.walk(pygit2.Oid(hex=tip), pygit2.enums.SortMode.NONE)
    if base_commit is not None:
        with contextlib.suppress(KeyError, ValueError, pygit2.GitError):
            walker.hide(pygit2.Oid(hex=base_commit))
    commits = list(walker)  # bounded by the base: a hidden walk stops there
    inside = {commit.id for commit in commits}
    for commit in commits:
        parents = commit.parent_ids
        if not parents:
            _record_all(commit.tree, trie, "", versions)
            continue
        parent = store.repo[parents[0]]
        assert isinstance(parent, pygit2.Commit)
        if parents[0] not in inside and str(parents[0]) != base_commit:
            _record_all(parent.tree, trie, "", versions)  # a merged side's first parent
        _record_changed(commit.tree, parent.tree, trie, "", versions)
    return versions


# A trie of the paths: each name maps to its folder's trie, or to None for a path's last name.
_Trie = dict[str, "_Trie | None"]


def _trie(paths: list[str]) -> _Trie:
    root: _Trie = {}
    for path in paths:
        node = root
        *folders, name = path.split("/")
        for folder in folders:
            child = node.get(folder)
            if child is None:
                child = node[folder] = {}
            node = child
        node.setdefault(name, None)
    return root


def _version_of(entry: pygit2.Object | None) -> Version:
    if entry is None or entry.filemode in (MODE_TREE, MODE_GITLINK):
        return (None, None)
    return (str(entry.id), int(entry.filemode))


def _child(tree: pygit2.Tree | None, name: str) -> pygit2.Object | None:
    if tree is None:
        return None
    try:
        return tree[name]
    except KeyError:
        return None


def _subtree(tree: pygit2.Tree | None, name: str) -> pygit2.Tree | None:
    entry = _child(tree, name)
    if entry is None or entry.filemode != MODE_TREE:
        return None
    found = entry.peel(pygit2.Tree)
    return found if isinstance(found, pygit2.Tree) else None


def _record_all(
    tree: pygit2.Tree | None, trie: _Trie, prefix: str, versions: dict[str, set[Version]]
) -> None:
    """The version of every path of ``trie`` in ``tree``."""
    for name, below in trie.items():
        if below is None:
            versions[prefix + name].add(_version_of(_child(tree, name)))
        else:
            _record_all(_subtree(tree, name), below, f"{prefix}{name}/", versions)


def _record_changed(
    tree: pygit2.Tree | None,
    old: pygit2.Tree | None,
    trie: _Trie,
    prefix: str,
    versions: dict[str, set[Version]],
) -> None:
    """The version in ``tree`` of every path of ``trie`` below a folder that changed from
    ``old`` (an unchanged folder holds the versions already recorded)."""
    if tree is not None and old is not None and tree.id == old.id:
        return
    for name, below in trie.items():
        if below is None:
            versions[prefix + name].add(_version_of(_child(tree, name)))
        else:
            _record_changed(
                _subtree(tree, name), _subtree(old, name), below, f"{prefix}{name}/", versions
            )
