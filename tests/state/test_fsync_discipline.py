"""The fsync discipline, proven on the system calls of a real call (``strace``), not by reading
the code: every rename into ``.git`` or the state directory moves a file whose data was fsynced
first, and is followed by an fsync of the directory it lands in; a call's objects reach the disk
as one pack, whatever their number; and the ledger flushes only its durable records.

Two exceptions: the lock journal (``<state>/locks``): an entry lives only while its lock
does, and a lost or torn entry after a power cut makes ``recover`` report the lock, never remove
it (:mod:`applyonce.state.lockjournal`), so its entries are not flushed; and the note of the tip
the checkouts last showed (``<state>/followed.json``), written after the index it describes is
durable: a lost or torn note is read as none, and only makes the next call read further back
in the reflog (:mod:`applyonce.flow.checkouts.lag`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import APP_PATCH, Repo
from tests.strace import Syscall, needs_strace, parse, run_traced

pytestmark = needs_strace

_RENAMES = ["fsync", "fdatasync", "rename", "renameat", "renameat2", "link", "linkat"]


def _traced(repo: Repo, patch: str, *args: str, syscalls: list[str] = _RENAMES) -> list[Syscall]:
    log = repo.path.parent / "strace.log"
    run_traced(
        [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path), *args],
        log,
        syscalls,
        input=patch.encode(),
    )
    return parse(log)


def _synced(calls: list[Syscall]) -> list[str]:
    """The paths fsynced, in order."""
    return [c.fd().path for c in calls if c.name in ("fsync", "fdatasync")]


def _exempt(state: Path) -> tuple[Path, ...]:
    """What the discipline does not cover (see the module docstring)."""
    return (state / "locks", state / "followed.json")


def _check_discipline(
    calls: list[Syscall], roots: list[Path], exempt: tuple[Path, ...]
) -> list[str]:
    """Each rename into ``roots`` (outside ``exempt``): its source fsynced before, the target's
    directory fsynced after. Returns the target paths of the renames checked."""
    durable: set[str] = set()
    renamed: list[tuple[int, str]] = []
    for i, call in enumerate(calls):
        if call.name in ("fsync", "fdatasync"):
            durable.add(call.fd().path)
        elif call.name in ("rename", "renameat", "renameat2") and call.result == 0:
            source, target = call.paths()
            if source in durable:
                durable.add(target)  # the same inode, now under its new name
            if not any(Path(target).is_relative_to(root) for root in roots):
                continue
            if any(Path(target).is_relative_to(path) for path in exempt):
                continue
            assert source in durable, f"{source} renamed to {target} before its data was fsynced"
            renamed.append((i, target))
    for i, target in renamed:
        parent = str(Path(target).parent)
        later = _synced(calls[i + 1 :])
        assert parent in later, f"no fsync of {parent} after renaming into it"
    return [target for _, target in renamed]


def test_every_rename_into_git_or_the_state_dir_follows_an_fsync_and_is_made_durable(
    repo: Repo,
) -> None:
    git_dir = (repo.path / ".git").resolve()
    state = git_dir / "applyonce"
    calls = _traced(repo, APP_PATCH)
    targets = _check_discipline(calls, [git_dir], exempt=_exempt(state))
    names = {Path(t).name for t in targets}
    # What the call put in place: its receipts, its pack and index, the branch, the index.
    assert any(n.endswith(".json") for n in names), names
    assert any(n.endswith(".pack") for n in names) and any(n.endswith(".idx") for n in names)
    assert "main" in names and "index" in names, names


def test_the_checkout_is_durable_before_the_index_that_describes_it(repo: Repo) -> None:
    """The sync's work-tree files are fsynced before their rename, and every directory whose
    names changed (a file replaced, added or deleted, a directory made) is fsynced before the
    new index is renamed into place: a power cut never leaves an index, nor a ``synced`` event,
    naming a work tree that the disk does not hold (tests/durability/test_power_loss.py)."""
    patch = APP_PATCH.replace("*** End Patch", "*** Delete File: src/util.py\n*** End Patch")
    calls = _traced(repo, patch, syscalls=[*_RENAMES, "unlink", "unlinkat", "mkdir", "mkdirat"])
    root = repo.path.resolve()
    index = root / ".git" / "index"
    durable: set[str] = set()
    changed: dict[str, str] = {}  # a work-tree directory whose names changed: by what
    for call in calls:
        paths = [Path(p) for p in call.paths()]
        if call.name in ("fsync", "fdatasync"):
            durable.add(call.fd().path)
            changed.pop(call.fd().path, None)
        elif call.result != 0 or not paths or not paths[-1].is_relative_to(root):
            continue
        elif paths[-1] == index:
            assert call.name == "rename", call
            assert not changed, f"the index is renamed into place before {changed} is durable"
            break
        elif ".git" in paths[-1].relative_to(root).parts:
            continue
        elif call.name == "rename":
            assert str(paths[0]) in durable, f"{paths[0]} renamed before its data was fsynced"
            changed[str(paths[-1].parent)] = call.name
        elif call.name in ("unlink", "unlinkat", "mkdir", "mkdirat"):
            changed[str(paths[-1].parent)] = call.name
    else:
        raise AssertionError("the index was not written")
    assert (root / "tests" / "test_app.py").is_file() and not (root / "src" / "util.py").exists()


def test_the_index_lock_is_gone_for_good_before_its_journal_entry_is(repo: Repo) -> None:
    """The journal entry proves index.lock applyonce's; removed first after a power cut, it
    would leave a lock that recover must not remove. So the lock's removal (with the new
    index's rename) is made durable by an fsync of ``.git`` before the entry is removed."""
    calls = _traced(repo, APP_PATCH, syscalls=[*_RENAMES, "unlink", "unlinkat"])
    git_dir = (repo.path / ".git").resolve()
    journal = git_dir / "applyonce" / "locks"
    events = []  # the lock's removal, its entry's, the fsyncs of .git: in order
    for call in calls:
        if call.name in ("fsync", "fdatasync") and call.fd().path == str(git_dir):
            events.append("sync")
        elif call.name in ("unlink", "unlinkat") and call.result == 0:
            removed = Path(call.paths()[-1])
            if removed == git_dir / "index.lock":
                events.append("lock")
            elif removed.parent == journal and removed.suffix == ".json":
                events.append("entry")
    assert "lock" in events, events
    after = events[events.index("lock") + 1 :]
    assert "sync" in after and "entry" in after, events
    assert after.index("sync") < after.index("entry"), events


def test_a_call_writes_its_objects_as_one_pack_with_three_fsyncs(repo: Repo) -> None:
    """Blobs, trees and the commit of a two-file call (about eight objects): no loose object
    file, one pack and its index, fsynced once each, and one fsync of the pack directory (its
    ``.keep`` and its record in the state directory are not flushed: lost in a power cut, they
    only leave the pack to git's housekeeping)."""
    objects = (repo.path / ".git" / "objects").resolve()
    loose_before = {p for p in objects.glob("??/*")}
    calls = _traced(repo, APP_PATCH)
    assert {p for p in objects.glob("??/*")} == loose_before
    object_syncs = [p for p in _synced(calls) if p.startswith(str(objects))]
    assert len(object_syncs) == 3, object_syncs
    # The pack and its index, in temp files of applyonce's (git prune deletes git's tmp_* ones).
    assert sorted(Path(p).name.split(".")[1] for p in object_syncs[:2]) == [
        "applyonce-tmp-idx",
        "applyonce-tmp-pack",
    ]
    assert object_syncs[2] == str(objects / "pack")
    assert repo.git("fsck", "--strict", "--no-dangling") == ""


_IN_PROCESS = """
import os, sys
from applyonce import Executor
executor = Executor(sys.argv[1])
executor.apply("*** Begin Patch\\n*** Add File: warm.txt\\n+x\\n*** End Patch\\n")
marker = os.path.join(sys.argv[2], "call-begins")
fd = os.open(marker, os.O_WRONLY | os.O_CREAT); os.fsync(fd)
executor.apply(sys.stdin.read())
os.fsync(fd)
"""


def test_the_ledger_flushes_twice_a_call_prepared_and_committed(repo: Repo) -> None:
    """In a long-lived process (the MCP server's case), a call's ledger records cost two
    flushes: the claim, the staging's progress and the sync ride on the durable ones."""
    log = repo.path.parent / "strace.log"
    run_traced(
        [sys.executable, "-c", _IN_PROCESS, str(repo.path), str(repo.path.parent)],
        log,
        ["fsync", "fdatasync"],
        input=APP_PATCH.encode(),
    )
    paths = _synced(parse(log))
    marker = str((repo.path.parent / "call-begins").resolve())
    begin, end = (i for i, p in enumerate(paths) if p == marker)
    during = paths[begin + 1 : end]
    wal = str((repo.path / ".git" / "applyonce" / "ledger.sqlite3-wal").resolve())
    assert during.count(wal) == 2, during


def test_recover_keeps_the_discipline_and_syncs_the_receipts_folder_once_a_batch(
    repo: Repo,
) -> None:
    """Three calls killed after their publish: recover writes three committed receipts, each
    fsynced before its rename, and the folder once, before the ledger records them."""
    for i in range(3):
        patch = f"*** Begin Patch\n*** Add File: killed{i}.txt\n+{i}\n*** End Patch\n"
        killed = subprocess.run(
            [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(repo.path)],
            input=patch.encode(),
            capture_output=True,
            check=False,
            env={**os.environ, "APPLYONCE_FAULT": "after-publish"},
        )
        assert killed.returncode == -9
    log = repo.path.parent / "strace.log"
    run_traced(
        [sys.executable, "-m", "applyonce", "recover", "--repo", str(repo.path)], log, _RENAMES
    )
    calls = parse(log)
    git_dir = (repo.path / ".git").resolve()
    targets = _check_discipline(calls, [git_dir], exempt=_exempt(git_dir / "applyonce"))
    receipts = git_dir / "applyonce" / "receipts"
    assert sum(Path(t).parent == receipts for t in targets) == 3, targets
    syncs = [c for c in calls if c.name == "fsync" and c.fd().path == str(receipts)]
    assert len(syncs) == 1, syncs
    assert len(repo.call_ids()) == 3


_GROUP = """
import os, sys
from applyonce import Executor
from applyonce.flow.call.group import Request, apply_many
from applyonce.flow.options import CallOptions
executor = Executor(sys.argv[1])
executor.apply("*** Begin Patch\\n*** Add File: warm.txt\\n+x\\n*** End Patch\\n")
marker = os.path.join(sys.argv[2], "call-begins")
fd = os.open(marker, os.O_WRONLY | os.O_CREAT); os.fsync(fd)
patches = [f"*** Begin Patch\\n*** Add File: g{i}.txt\\n+{i}\\n*** End Patch\\n" for i in range(4)]
results = apply_many(executor.context, [Request(p, CallOptions()) for p in patches])
assert [r.receipt.status for r in results] == ["committed"] * 4, results
os.fsync(fd)
"""


def test_a_group_keeps_the_discipline_and_pays_its_flushes_once(repo: Repo) -> None:
    """Four calls published as a group (docs/design.md §1, "Groups"), in this order: the four
    prepared receipts (each fsynced, their folder once), one durable ledger transaction; one
    pack for the four commits (three fsyncs); the branch moved once; the four committed receipts
    (their folder once); one durable ledger transaction; every rename made durable."""
    log = repo.path.parent / "strace.log"
    run_traced([sys.executable, "-c", _GROUP, str(repo.path), str(repo.path.parent)], log, _RENAMES)
    calls = parse(log)
    marker = str((repo.path.parent / "call-begins").resolve())
    begin, end = (i for i, c in enumerate(calls) if c.name == "fsync" and c.fd().path == marker)
    group = calls[begin + 1 : end]
    git_dir = (repo.path / ".git").resolve()
    state = git_dir / "applyonce"
    targets = _check_discipline(group, [git_dir], exempt=_exempt(state))
    receipts, objects = state / "receipts", git_dir / "objects"
    wal = str(state / "ledger.sqlite3-wal")
    branch = str(git_dir / "refs" / "heads" / "main")
    # What was made durable, in order, by kind.
    order: list[str] = []
    for call in group:
        synced = call.fd().path if call.name in ("fsync", "fdatasync") else None
        if synced == str(receipts):
            order.append("receipts/")
        elif synced == wal:
            order.append("ledger")
        elif synced is not None and synced.startswith(str(objects)):
            order.append("objects")
        elif call.name in ("rename", "renameat", "renameat2") and call.paths()[-1] == branch:
            order.append("branch")
    assert order == [
        "receipts/",
        "ledger",
        *["objects"] * 3,
        "branch",
        "receipts/",
        "ledger",
    ], order
    assert sum(Path(t).parent == receipts for t in targets) == 8, targets
    assert len(repo.call_ids()) == 5


_ONE_THEN_GROUP = """
import os, sys
from applyonce import Executor
from applyonce.flow.call.group import Request, apply_many
from applyonce.flow.options import CallOptions
executor = Executor(sys.argv[1])
executor.apply("*** Begin Patch\\n*** Add File: warm.txt\\n+x\\n*** End Patch\\n")
fd = os.open(os.path.join(sys.argv[2], "call-begins"), os.O_WRONLY | os.O_CREAT)
for folder, count in (("one", 1), ("four", 4)):
    os.fsync(fd)
    patches = [
        f"*** Begin Patch\\n*** Add File: {folder}/g{i}.txt\\n+{i}\\n*** End Patch\\n"
        for i in range(count)
    ]
    results = apply_many(executor.context, [Request(p, CallOptions()) for p in patches])
    assert [r.receipt.status for r in results] == ["committed"] * count, results
os.fsync(fd)
"""


def test_each_further_call_of_a_group_costs_three_fsyncs_its_receipts_and_its_file(
    repo: Repo,
) -> None:
    """A call alone, then a group of four, each adding a file to a new folder: the group makes
    the fsyncs of the call alone plus, for each further call, only what is its own: its
    prepared and committed receipts and its new file in the checkout. The pack, the branch and
    its reflog, the ledger, the folders and the lock journal are paid once a group."""
    log = repo.path.parent / "strace.log"
    run_traced(
        [sys.executable, "-c", _ONE_THEN_GROUP, str(repo.path), str(repo.path.parent)],
        log,
        ["fsync", "fdatasync"],
    )
    paths = _synced(parse(log))
    marker = str((repo.path.parent / "call-begins").resolve())
    first, second, third = (i for i, p in enumerate(paths) if p == marker)
    alone, group = paths[first + 1 : second], paths[second + 1 : third]
    assert len(group) == len(alone) + 3 * 3, (alone, group)
    receipts = str((repo.path / ".git" / "applyonce" / "receipts").resolve())
    assert sum(Path(p).parent == Path(receipts) for p in group) == 8
    assert len(repo.call_ids()) == 6
