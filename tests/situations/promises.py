"""The core promises every cell of the matrix checks, on the real repository after the call.

:class:`Snapshot` is everything of the user's a call could touch: every ref and its value, the
pseudo-refs (``HEAD``'s symref, ``ORIG_HEAD``, ``FETCH_HEAD``) of every work tree, the config's
bytes, each work tree's files, index entries and ``git status``, and every commit reachable from
a branch, tag or remote-tracking ref. A call that lands must change only what it is meant to
(:func:`assert_landed`); one that refuses must change nothing at all and leave nothing that makes
the next call fail (:func:`assert_refused`).
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import Run, git, snapshot
from tests.situations.states import Expect, Situation

PSEUDO_REFS = ("HEAD", "ORIG_HEAD", "FETCH_HEAD")


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _z(out: str) -> list[str]:
    return [item for item in out.split("\0") if item]


@dataclass(frozen=True)
class Checkout:
    """One work tree as the user sees it."""

    files: dict[str, bytes]
    index: dict[str, str]  # path -> "tag mode oid stage" (tag S: skip-worktree)
    status: dict[str, str]  # path -> porcelain XY
    pseudo: dict[str, bytes | None]  # its own HEAD, ORIG_HEAD, FETCH_HEAD

    @classmethod
    def take(cls, path: Path) -> Checkout:
        index = {}
        for line in _z(git(path, "ls-files", "-s", "-t", "-z")):
            meta, name = line.split("\t", 1)
            index[name] = meta
        status = {}
        out = git(
            path,
            "status",
            "--porcelain=v1",
            "-z",
            "--no-renames",
            "--untracked-files=all",
            "--ignore-submodules=none",
        )
        for item in _z(out):
            status[item[3:]] = item[:2]
        gitdir = Path(git(path, "rev-parse", "--absolute-git-dir").strip())
        return cls(
            files=snapshot(path),
            index=index,
            status=status,
            pseudo={name: _read(gitdir / name) for name in PSEUDO_REFS},
        )


@dataclass(frozen=True)
class Snapshot:
    refs: dict[str, str]
    pseudo: dict[str, bytes | None]  # the common git dir's
    config: bytes | None
    checkouts: dict[Path, Checkout]
    reachable: frozenset[str]
    origin_refs: dict[str, str] | None

    @classmethod
    def take(cls, sit: Situation) -> Snapshot:
        common = git_dir(sit.repo)
        reachable = git(sit.repo, "rev-list", "--branches", "--tags", "--remotes").split()
        return cls(
            refs=refs_of(sit.repo),
            pseudo={name: _read(common / name) for name in PSEUDO_REFS},
            config=_read(common / "config"),
            checkouts={path: Checkout.take(path) for path in sit.checkouts},
            reachable=frozenset(reachable),
            origin_refs=refs_of(sit.origin) if sit.origin is not None else None,
        )


def git_dir(repo: Path) -> Path:
    return Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())


# applyonce's own namespace (its private fetches, its pending pushes): its state, not the
# user's refs.
OWN_REFS = "refs/applyonce/"


def user_refs(refs: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in refs.items() if not k.startswith(OWN_REFS)}


def refs_of(repo: Path) -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname) %(symref)")
    refs = {}
    for line in out.splitlines():
        name, value, symref = line.split(" ")
        refs[name] = f"-> {symref}" if symref else value
    return refs


def tip(repo: Path, ref: str) -> str | None:
    out = git(repo, "rev-parse", "--verify", "--quiet", ref, check=False).strip()
    return out or None


def call_ids(repo: Path, rev: str) -> list[str]:
    """The Call-Id of every commit ``git log rev`` shows, newest first (``rev`` may be a range)."""
    out = git(repo, "log", "--format=%(trailers:key=Call-Id,valueonly)", rev)
    return [line.strip() for line in out.splitlines() if line.strip()]


def trailer_values(repo: Path, rev: str, key: str) -> list[str]:
    out = git(repo, "log", f"--format=%(trailers:key={key},valueonly)", rev)
    return [line.strip() for line in out.splitlines() if line.strip()]


def tree_entries(repo: Path, rev: str | None) -> dict[str, tuple[str, str]]:
    """``path -> (mode, blob id)`` of ``rev``'s tree (empty for None: an unborn branch)."""
    if rev is None:
        return {}
    entries = {}
    for line in _z(git(repo, "ls-tree", "-r", "-z", "--full-tree", rev)):
        meta, name = line.split("\t", 1)
        mode, _kind, oid = meta.split(" ")
        entries[name] = (mode, oid)
    return entries


def blob(repo: Path, rev: str | None, path: str) -> bytes | None:
    if rev is None:
        return None
    got = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "blob", f"{rev}:{path}"],
        capture_output=True,
        check=False,
    )
    return got.stdout if got.returncode == 0 else None


def work_tree_bytes(checkout: Path, rev: str, path: str) -> bytes:
    """What git itself would write in the work tree for ``path`` of ``rev`` (eol, filters)."""
    return subprocess.run(
        ["git", "-C", str(checkout), "cat-file", "--filters", f"{rev}:{path}"],
        capture_output=True,
        check=True,
    ).stdout


def assert_fsck(repo: Path) -> None:
    got = subprocess.run(
        ["git", "-C", str(repo), "fsck", "--strict", "--full", "--no-progress"],
        capture_output=True,
        text=True,
        check=False,
    )
    said = " / ".join((got.stderr + got.stdout).strip().splitlines()[:3])
    assert got.returncode == 0, f"git fsck --strict in {repo.name}: {said}"


def assert_no_locks(sit: Situation) -> None:
    dirs = {git_dir(sit.repo)}
    if sit.origin is not None:
        dirs.add(sit.origin)
    # Git's lock files; applyonce's own state directory holds flock files that stay by design.
    left = sorted(
        str(p) for d in dirs for p in d.rglob("*.lock") if "applyonce" not in p.relative_to(d).parts
    )
    assert not left, f"lock files left behind: {left}"


def _diff(what: str, before: Mapping[str, object], after: Mapping[str, object]) -> str:
    keys = sorted(set(before) | set(after))
    changed = [k for k in keys if before.get(k) != after.get(k)]
    shown = ", ".join(f"{k}: {before.get(k)!r} -> {after.get(k)!r}" for k in changed[:4])
    return f"{what} changed: {shown}"


def assert_same(what: str, before: Mapping[str, object], after: Mapping[str, object]) -> None:
    assert before == after, _diff(what, before, after)


def _volatile(name: str, prefixes: Iterable[str]) -> bool:
    return any(name.startswith(p) for p in prefixes)


@dataclass(frozen=True)
class Landing:
    """Where a call's commits landed and what the branch must hold there.

    ``where`` is the repository holding the branch the call published to (the clone, or the bare
    origin with ``--remote``); ``base`` its tip before; ``blobs`` the content (None: absent) the
    new tip must have at each path the calls touched; ``calls`` how many distinct Call-Ids the
    new commits carry; ``snapshots`` how many ``Snapshot-For`` commits come with them."""

    where: Path
    ref: str
    base: str | None
    blobs: dict[str, bytes | None]
    calls: int = 1
    snapshots: int = 0
    reverts: str | None = None  # the Call-Id the last call reverts


def assert_history(landing: Landing) -> tuple[str, list[str]]:
    """Exactly once, fast-forward, and exactly the change: returns the new tip and its calls."""
    where, base = landing.where, landing.base
    new = tip(where, landing.ref)
    assert new is not None, f"{landing.ref} does not exist in {where.name} after the call"
    if base is not None:
        assert new != base, f"{landing.ref} did not move in {where.name}"
        assert _is_ancestor(where, base, new), f"{landing.ref} was not fast-forwarded"
    span = f"{base}..{new}" if base is not None else new
    ids = call_ids(where, span)
    assert len(ids) == landing.calls, (
        f"{len(ids)} Call-Id commit(s) landed in {where.name}, expected {landing.calls}: {ids}"
    )
    for call in set(ids):
        count = call_ids(where, new).count(call)
        assert count == 1, f"Call-Id {call[:12]} is on {count} commits of {landing.ref}"
    snapshots = trailer_values(where, span, "Snapshot-For")
    assert len(snapshots) == landing.snapshots, f"Snapshot-For commits: {snapshots}"
    assert set(snapshots) <= set(ids), "a snapshot commit names another call"
    commits = git(where, "rev-list", "--count", span).strip()
    assert int(commits) == landing.calls + landing.snapshots, f"{commits} commits landed"
    if landing.reverts is not None:
        assert trailer_values(where, new, "Reverts-Call-Id").count(landing.reverts) == 1
    # The change, and only it: every path the calls touch holds what it must; nothing else moved.
    old, now = tree_entries(where, base), tree_entries(where, new)
    for path, content in landing.blobs.items():
        assert blob(where, new, path) == content, (
            f"{path} in the new commit: {blob(where, new, path)!r}"
        )
    moved = {p for p in set(old) | set(now) if old.get(p) != now.get(p)}
    expected = {p for p, c in landing.blobs.items() if blob(where, base, p) != c}
    assert moved == expected, (
        f"paths changed by the call: {sorted(moved)}, expected {sorted(expected)}"
    )
    for path in set(old) & set(now):
        assert old[path][0] == now[path][0], (
            f"{path}'s mode changed: {old[path][0]} -> {now[path][0]}"
        )
    return new, ids


def _is_ancestor(repo: Path, a: str, b: str) -> bool:
    got = subprocess.run(
        ["git", "-C", str(repo), "merge-base", "--is-ancestor", a, b],
        capture_output=True,
        check=False,
    )
    return got.returncode == 0


def assert_landed(
    sit: Situation,
    before: Snapshot,
    landing: Landing,
    *,
    remote: bool = False,
    lane: str | None = None,
) -> list[str]:
    """A call (or a few) that exited 0: once on its branch, nothing lost, fsck clean, and the
    user's refs, files and index changed only where the call is meant to write (``lane``: a lane
    call landed, whose branch ``agent/LANE`` may be new, here and with ``remote`` on the origin).
    Returns the new commits' Call-Ids."""
    assert_fsck(sit.repo)  # first: a branch at a missing commit says so, not what follows from it
    if remote:
        assert sit.origin is not None
        assert_fsck(sit.origin)
    new, ids = assert_history(landing)
    after = Snapshot.take(sit)
    local_ref = sit.branch
    local_tip = after.refs.get(local_ref, "").split(" ")[0] or None
    followed = True
    if remote:
        assert sit.origin is not None
        before_local = before.refs.get(local_ref, "").split(" ")[0] or None
        if local_tip != new:
            # The local branch stays only where it holds commits the remote lacks (the user's).
            assert before_local is not None and before_local != landing.base, (
                f"the local branch stayed at {before_local} though it was the remote's tip"
            )
            assert local_tip == before_local, "the local branch moved, but not to the remote's tip"
            followed = False
        else:
            for call in ids:
                assert call_ids(sit.repo, local_ref).count(call) == 1, "local branch lacks the call"
    # Refs: only the branch (and, with --remote, its remote-tracking ref) may move.
    allowed = {local_ref} if followed else set()
    lanes = {f"refs/heads/agent/{lane}"} if lane is not None else set()
    allowed |= lanes
    if remote:
        allowed.add(f"refs/remotes/origin/{local_ref.removeprefix('refs/heads/')}")
        allowed |= {f"refs/remotes/origin/{ref.removeprefix('refs/heads/')}" for ref in lanes}
    assert_same(
        "refs",
        {
            k: v
            for k, v in user_refs(before.refs).items()
            if k not in allowed and not _volatile(k, sit.volatile)
        },
        {
            k: v
            for k, v in user_refs(after.refs).items()
            if k not in allowed and not _volatile(k, sit.volatile)
        },
    )
    missing = before.reachable - after.reachable
    assert not missing, f"commits no longer reachable from any ref: {sorted(missing)[:3]}"
    keep = {k: v for k, v in before.pseudo.items() if not _volatile(k, sit.volatile)}
    assert_same("pseudo-refs", keep, {k: after.pseudo[k] for k in keep})
    assert before.config == after.config, "the repository's config was rewritten"
    if sit.origin is not None and before.origin_refs is not None:
        origin_moved = {landing.ref, *lanes} if remote else set()
        assert after.origin_refs is not None
        assert_same(
            "origin's refs",
            {k: v for k, v in before.origin_refs.items() if k not in origin_moved},
            {k: v for k, v in after.origin_refs.items() if k not in origin_moved},
        )
    assert_no_locks(sit)
    for path, was in before.checkouts.items():
        now = after.checkouts[path]
        if path == sit.follower and followed:
            _assert_followed(sit, path, was, now, new, set(landing.blobs) | set(sit.lagging))
        elif path == sit.follower and sit.lagging and local_tip is not None:
            # The local branch stayed (it holds commits the remote lacks): its lagging paths may
            # be brought up to it (recover finishes an unsynced call), or left as they were.
            caught = {
                p
                for p in sit.lagging
                if was.files.get(p) != now.files.get(p) or was.index.get(p) != now.index.get(p)
            }
            _assert_followed(sit, path, was, now, local_tip, caught)
        else:
            assert_same(f"files of {path.name}", was.files, now.files)
            assert_same(f"index of {path.name}", was.index, now.index)
            assert_same(f"status of {path.name}", was.status, now.status)
        kept = {k: v for k, v in was.pseudo.items() if not _volatile(k, sit.volatile)}
        assert_same(f"pseudo-refs of {path.name}", kept, {k: now.pseudo[k] for k in kept})
    return ids


def _assert_followed(
    sit: Situation, path: Path, was: Checkout, now: Checkout, new: str, touched: set[str]
) -> None:
    """The work tree that checks out the branch: the touched paths follow it as git would write
    them; every other file, index entry and status line is the user's, unchanged."""
    entries = tree_entries(path, new)
    for name in touched:
        entry = entries.get(name)
        tag = now.index.get(name, "").split(" ")[0]
        if entry is None:
            assert name not in now.index, f"{name} is still in the index"
            assert name not in now.files, f"{name} is still in the work tree"
            continue
        assert name in now.index, f"{name} is not in the index"
        mode, oid, _stage = now.index[name].split(" ")[1:4]
        assert oid == entry[1], f"{name}'s index entry is not the branch's"
        assert mode == entry[0], f"{name}'s index entry has mode {mode}, the branch {entry[0]}"
        if name in sit.outside:
            assert tag == "S", f"{name}, outside the sparse checkout, lost its skip-worktree bit"
        if tag == "S":  # outside a sparse checkout: the work tree does not hold it
            assert now.files.get(name) == was.files.get(name), (
                f"{name} was written outside the cone"
            )
        else:
            assert now.files.get(name) == work_tree_bytes(path, new, name), (
                f"{name} in the work tree is not what git would write: {now.files.get(name)!r}"
            )
        assert name not in now.status, f"git status shows {now.status[name]!r} for {name}"

    def same(entries: Mapping[str, object]) -> dict[str, object]:
        return {k: v for k, v in entries.items() if k not in touched}

    assert_same(f"files of {path.name} the call does not touch", same(was.files), same(now.files))
    assert_same(f"index of {path.name} the call does not touch", same(was.index), same(now.index))
    assert_same(
        f"status of {path.name} the call does not touch", same(was.status), same(now.status)
    )


def assert_refused(
    sit: Situation, before: Snapshot, run: Run, expect: Expect, again: Callable[[], Run]
) -> None:
    """One ``error:`` line, an exit the situation allows, nothing written, no lock left, a repeat
    that answers the same way, and — once the user did what the hint says (``sit.cure``) — a
    repeat that lands: no state is left that makes the next call fail."""
    assert run.returncode in expect.exits, f"exit {run.returncode}: {run.stderr[-400:]}"
    assert "Traceback" not in run.stderr + run.stdout, run.stderr[-400:]
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"not one error line: {lines}"
    assert re.search(expect.message, lines[0], re.IGNORECASE), f"unexpected refusal: {lines[0]}"
    after = Snapshot.take(sit)
    assert_same("refs", user_refs(before.refs), user_refs(after.refs))
    assert_same("pseudo-refs", before.pseudo, after.pseudo)
    assert before.config == after.config, "the repository's config was rewritten"
    assert before.origin_refs == after.origin_refs, "origin's refs changed"
    for path, was in before.checkouts.items():
        now = after.checkouts[path]
        assert_same(f"files of {path.name}", was.files, now.files)
        assert_same(f"index of {path.name}", was.index, now.index)
        assert_same(f"status of {path.name}", was.status, now.status)
        assert_same(f"pseudo-refs of {path.name}", was.pseudo, now.pseudo)
    assert_no_locks(sit)
    repeat = again()
    first = (repeat.stderr.strip().splitlines() or [""])[0]
    assert (repeat.returncode, first) == (run.returncode, lines[0]), (
        f"the repeat answered differently: exit {repeat.returncode}: {repeat.stderr.strip()[-300:]}"
    )
    if sit.cure:
        for command in sit.cure:
            git(sit.repo, *command)
        cured = again()
        assert cured.returncode == 0, (
            f"after the hint was followed ({' && '.join('git ' + ' '.join(c) for c in sit.cure)}),"
            f" the call still fails: exit {cured.returncode}:"
            f" {' / '.join(cured.stderr.strip().splitlines())[-300:]}"
        )
