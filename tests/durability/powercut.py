"""Power cuts, simulated from a real call's system calls, as ALICE (Pillai et al., OSDI '14, "All
File Systems Are Not Created Equal") and CrashMonkey (Mohan et al., OSDI '18) do.

A kill (``APPLYONCE_FAULT`` → SIGKILL) loses the process, never a write: the kernel still holds
every byte it was given. A power cut loses what the kernel had not yet put on the disk, and the
disk may hold a later write without an earlier one. This module rebuilds the states a disk can hold
after a power cut in the middle of one real ``applyonce apply``, so each can be recovered and
checked.

**Recording** (:func:`record`). The repository (work tree and ``.git``, with applyonce's state
directory inside it) is read first; then the call runs for real under ``strace -f -y -xx -s 16M``
tracing every system call that writes a file, changes a name or makes something durable
(:data:`SYSCALLS`). The log holds the written bytes themselves, so nothing is read back from the
disk afterwards: each effect is replayed with its data, as ALICE replays its logical operations.

**Replay** (:class:`Model`). What was read is the start of a model of the file system (inodes; a
directory maps names to inodes) and each traced call becomes a logical effect on it: bytes written
at an offset of an inode, a truncation, a name added to, removed from or moved between
directories. Descriptors are followed (open, dup, fcntl, clone/fork, lseek, close) to give each
``write`` its inode and offset, and the inode is checked against the path ``strace`` printed for the
descriptor: a trace the model cannot follow is an error, never a guess, and the model must end
with the very tree the call left on disk. Paths outside the
repository are ignored, except the process's standard output: the ``write(1, "Success…")`` that
reports the call committed is the moment after which it must survive.

**Persistence** (POSIX's promises, ALICE's weakest file system). A file's data effects are on the
disk once it is fsynced (``fsync``/``fdatasync``) after them; a directory's name effects (create,
mkdir, link, symlink, unlink, rmdir, a rename *into* it) once that directory is fsynced after them;
``sync``/``syncfs`` make everything durable. Nothing else is: the fsync of a new file does not make
its name durable, a rename is durable by an fsync of its target directory only, and
``sync_file_range`` promises nothing. An effect not yet durable at the cut may be lost or kept.

**Crash states** (:func:`crash_states`). A cut falls before each fsync of a file or directory of
the repository (the moments the most effects are in flight), after each rename, link or unlink,
after the ``Success`` write, and after the last call. At each cut, the disk holds the durable
effects plus, by variant: every other effect too (``keep-all``: what a kill leaves), none of them
(``lose-all``), all but one file's (``lose-data PATH``; not for SQLite's ``-shm`` index, whose
bytes SQLite never trusts after a crash), all but one directory's (``lose-names PATH``). A file's
or a directory's effects are lost from its last fsync on, never in between. States with the same
bytes are run once (:attr:`CrashState.same` lists the cuts and variants each stands for).

Not modelled: a single ``write`` torn in part (SQLite's WAL checksums its frames and git's packs
are checked whole; applyonce's own writes are renamed into place complete), writes through a
shared writable ``mmap`` (only SQLite's ``-shm`` index is written so, and SQLite rebuilds it from
the WAL when the first connection opens; a repository file mapped so fails the recording), file
systems that lose a name whose directory *was* fsynced, and file times (a state's files all get
the moment it is written back: a rule that compares a lock's time with its journal entry's sees
them made together). Two names of one inode are written back as two files.

**Checks** (:func:`check`). Each state is written back at the repository's own path (the lock
journal holds absolute paths, as after a reboot), then a real ``applyonce recover``, the same call
again (a real process), ``git fsck --strict``, ``applyonce audit``, and the ledger opened with
``PRAGMA integrity_check``. The call must be on the branch exactly once; once the call printed
``Success``, the commit it reported must be the one there; and the checkout must be in sync with
it (``git status`` clean: the repository holds no change of its own). Where ``recover`` or the call
refuses because of a lock file it cannot prove its own and says to remove it, the lock is removed
as the message says and both run again (:func:`_settle`): the verdict lists such locks.

Used by ``tests/durability/test_power_loss.py`` (a fixed sample) and
``benchmarks/bench_power_loss.py`` (every state).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import os
import re
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import REPLAY_HEAD, STORED_MARK
from tests.strace import Fd, Syscall, parse, run_traced

SYSCALLS = [
    "open", "openat", "creat", "write", "pwrite64", "writev", "pwritev", "pwritev2", "lseek",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink",
    "unlinkat", "mkdir", "mkdirat", "rmdir", "truncate", "ftruncate", "fallocate",
    "copy_file_range", "sendfile", "fsync", "fdatasync", "sync", "syncfs", "sync_file_range",
    "close", "dup", "dup2", "dup3", "fcntl", "clone", "clone3", "fork", "vfork", "mmap",
]  # fmt: skip
BARRIERS = ("fsync", "fdatasync")
REPORTED = b"Success"  # the first bytes of the output that tells the agent "committed"


class TraceError(Exception):
    """The trace holds something the model cannot follow faithfully."""


# --- the file-system model -----------------------------------------------------------------------


@dataclass
class Node:
    kind: str  # "file", "dir", "symlink"
    mode: int
    data: bytearray = field(default_factory=bytearray)
    entries: dict[str, int] = field(default_factory=dict)
    target: bytes = b""


Tree = dict[int, Node]  # node id -> node; node 0 is the repository's directory
ROOT = 0


@dataclass(frozen=True)
class Effect:
    """One change to the file system, as the disk would apply it.

    ``owner``: what must be fsynced for it to be durable: ``("data", inode)``, ``("names",
    directory)``, or ``("new", inode)`` (allocating an inode, invisible until it is named: always
    applied)."""

    seq: int  # the index of its system call
    owner: tuple[str, int]
    op: tuple[Any, ...]  # the kind, then its arguments (see apply_effect)


def apply_effect(tree: Tree, effect: Effect) -> None:
    """Apply ``effect`` to ``tree``, as the disk does when it keeps it."""
    kind, *args = effect.op
    if kind == "new":
        node, node_kind, mode, target = args
        tree[node] = Node(node_kind, mode, target=target)
    elif kind == "write":
        node, offset, data = args
        buffer = tree[node].data
        if len(buffer) < offset:
            buffer.extend(b"\0" * (offset - len(buffer)))
        buffer[offset : offset + len(data)] = data
    elif kind == "truncate":
        node, size = args
        buffer = tree[node].data
        del buffer[size:]
        buffer.extend(b"\0" * (size - len(buffer)))
    elif kind == "link":
        directory, name, node = args
        tree[directory].entries[name] = node
    elif kind == "unlink":  # only the name of the node it removed (not one named so later)
        directory, name, node = args
        if tree[directory].entries.get(name) == node:
            del tree[directory].entries[name]
    elif kind == "rename":
        source_dir, source, target_dir, target, node = args
        tree[target_dir].entries[target] = node
        moved = (source_dir, source) != (target_dir, target)
        if moved and tree[source_dir].entries.get(source) == node:
            del tree[source_dir].entries[source]
    else:
        raise AssertionError(effect)


def load_tree(root: Path) -> Tree:
    """The model of the directory ``root`` as it is on disk."""
    tree: Tree = {}

    def load(path: Path) -> int:
        st = os.lstat(path)
        node_id = len(tree)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            tree[node_id] = node = Node("dir", mode)
            for child in sorted(os.listdir(path)):
                node.entries[child] = load(path / child)
        elif stat.S_ISLNK(st.st_mode):
            tree[node_id] = Node("symlink", mode, target=os.fsencode(os.readlink(path)))
        elif stat.S_ISREG(st.st_mode):
            tree[node_id] = Node("file", mode, data=bytearray(path.read_bytes()))
        else:
            raise TraceError(f"{path}: not a file, directory or symlink")
        return node_id

    load(root)
    return tree


def walk(tree: Tree, node: int = ROOT, prefix: str = "") -> Iterator[tuple[str, Node]]:
    """Every named node under ``node``, parents first, by relative path."""
    for name in sorted(tree[node].entries):
        child = tree[node].entries[name]
        path = f"{prefix}{name}"
        yield path, tree[child]
        if tree[child].kind == "dir":
            yield from walk(tree, child, f"{path}/")


def digest(tree: Tree) -> str:
    """What a state holds, by bytes: two states with one digest are the same disk."""
    h = hashlib.sha256()
    for path, node in walk(tree):
        h.update(f"{path}\0{node.kind}\0{node.mode:o}\0".encode())
        h.update(bytes(node.data) if node.kind == "file" else node.target)
        h.update(b"\0")
    return h.hexdigest()


def materialize(tree: Tree, root: Path) -> None:
    """Write the state ``tree`` at ``root`` (replacing whatever is there)."""
    if root.exists():
        for path in [root, *root.rglob("*")]:  # read-only directories would stop rmtree
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o700)
        shutil.rmtree(root)
    root.mkdir()
    modes: list[tuple[Path, int]] = []
    for relative, node in walk(tree):
        path = root / relative
        if node.kind == "dir":
            path.mkdir()
            modes.append((path, node.mode))
        elif node.kind == "symlink":
            os.symlink(os.fsdecode(node.target), path)
        else:
            path.write_bytes(bytes(node.data))
            path.chmod(node.mode)
    for path, mode in reversed(modes):  # children first: a directory made read-only last
        path.chmod(mode)
    root.chmod(tree[ROOT].mode)


# --- following the trace -------------------------------------------------------------------------


@dataclass
class OpenFile:
    """An open file description: what ``open`` returned, shared by dup and fork."""

    node: int | None  # None: outside the repository
    offset: int = 0
    append: bool = False


class Model:
    """Turns the trace of one process tree into effects on the tree of ``root``."""

    def __init__(self, root: Path, initial: Tree, umask: int) -> None:
        self.root = str(root)
        self.live: Tree = copy.deepcopy(initial)  # the kernel's view: every effect applied
        self.umask = umask
        self.effects: list[Effect] = []
        self.barriers: list[tuple[int, int | None]] = []  # (seq, node); None: every node
        self.reported: int | None = None  # the seq of the "Success" write
        self.names: dict[int, str] = {node: path for path, node in self._named(initial)}
        self.names[ROOT] = "."
        self._tables: dict[int, dict[int, OpenFile]] = {}
        self._cwd: dict[int, str] = {}

    @staticmethod
    def _named(tree: Tree) -> Iterator[tuple[str, int]]:
        stack = [(ROOT, "")]
        while stack:
            node, prefix = stack.pop()
            for name, child in tree[node].entries.items():
                yield f"{prefix}{name}", child
                if tree[child].kind == "dir":
                    stack.append((child, f"{prefix}{name}/"))

    # paths
    def _relative(self, path: str) -> list[str] | None:
        if path == self.root:
            return []
        if not path.startswith(self.root + "/"):
            return None
        return [p for p in path[len(self.root) + 1 :].split("/") if p and p != "."]

    def lookup(self, path: str, *, follow: bool = False, depth: int = 0) -> int | None:
        """The node at ``path`` in the live model (None: outside the root, or no such name);
        symlinks are followed in the directories on the way, and at the end with ``follow``."""
        parts = self._relative(path)
        if parts is None:
            return None
        node = ROOT
        for i, part in enumerate(parts):
            entries = self.live[node].entries
            if part not in entries:
                return None
            node = entries[part]
            if self.live[node].kind == "symlink" and (follow or i < len(parts) - 1):
                if depth > 40:
                    raise TraceError(f"{path}: too many symlinks")
                here = self.root + "/" + "/".join(parts[:i])
                target = os.path.join(here, os.fsdecode(self.live[node].target))
                rest = "/".join(parts[i + 1 :])
                resolved = os.path.normpath(os.path.join(target, rest) if rest else target)
                return self.lookup(resolved, follow=follow, depth=depth + 1)
        return node

    def _parent(self, path: str) -> tuple[int, str] | None:
        """The directory node that holds ``path`` and its last name; None outside the root."""
        parts = self._relative(path)
        if not parts:
            return None
        parent = self.lookup(self.root + "/" + "/".join(parts[:-1])) if parts[:-1] else ROOT
        if parent is None:
            raise TraceError(f"{path}: its directory is not in the model")
        return parent, parts[-1]

    def _absolute(self, call: Syscall, path: bytes, dirfd: Fd | None) -> str:
        text = os.fsdecode(path)
        if text.startswith("/"):
            return os.path.normpath(text)
        base = dirfd.path if dirfd is not None else self._cwd.get(call.pid)
        if base is None:
            raise TraceError(f"a relative path with no known directory: {call}")
        return os.path.normpath(os.path.join(base, text))

    def _at(self, call: Syscall, fd_index: int, path_index: int) -> str:
        dirfd = call.args[fd_index]
        assert isinstance(dirfd, Fd), call
        path = call.args[path_index]
        assert isinstance(path, bytes), call
        return self._absolute(call, path, dirfd)

    def _plain(self, call: Syscall, index: int) -> str:
        path = call.args[index]
        assert isinstance(path, bytes), call
        return self._absolute(call, path, None)

    # effects
    def _effect(self, seq: int, owner: tuple[str, int], *op: object) -> None:
        effect = Effect(seq, owner, tuple(op))
        apply_effect(self.live, effect)
        self.effects.append(effect)

    def _new(self, seq: int, kind: str, mode: int, target: bytes = b"") -> int:
        node = max(self.live) + 1
        self._effect(seq, ("new", node), "new", node, kind, mode & ~self.umask, target)
        return node

    def _name(self, seq: int, path: str, node: int) -> None:
        parent = self._parent(path)
        assert parent is not None
        self._effect(seq, ("names", parent[0]), "link", parent[0], parent[1], node)
        self.names[node] = os.path.relpath(path, self.root)

    # descriptors
    def _table(self, pid: int) -> dict[int, OpenFile]:
        return self._tables.setdefault(pid, {})

    def _open_file(self, call: Syscall, index: int = 0) -> OpenFile:
        fd = call.fd(index)
        found = self._table(call.pid).get(fd.number)
        if found is None:
            # Opened before the trace began (stdin/stdout/stderr) or outside it: by its path.
            found = OpenFile(None if fd.deleted else self.lookup(fd.path))
            self._table(call.pid)[fd.number] = found
        if found.node is not None and not fd.deleted and self.lookup(fd.path) != found.node:
            raise TraceError(f"descriptor {fd} is not the file the model opened: {call}")
        return found

    def follow(self, seq: int, call: Syscall) -> None:
        for arg in call.args:
            if isinstance(arg, Fd) and arg.number == -100:
                self._cwd[call.pid] = arg.path
        name = call.name
        if call.result < 0 and name not in ("sync", "exit"):
            return
        if name in ("open", "openat", "creat"):
            if name == "openat":
                path, flags, mode = self._at(call, 0, 1), call.args[2], call.args[3:4]
            elif name == "open":
                path, flags, mode = self._plain(call, 0), call.args[1], call.args[2:3]
            else:
                path, flags, mode = self._plain(call, 0), "O_WRONLY|O_CREAT|O_TRUNC", call.args[1:2]
            assert isinstance(flags, str), call
            node = self.lookup(path, follow="O_NOFOLLOW" not in flags)
            inside = self._relative(path) is not None
            if inside and node is None:
                if "O_CREAT" not in flags:
                    raise TraceError(f"opened a file the model does not have: {call}")
                assert mode and isinstance(mode[0], str), call
                node = self._new(seq, "file", int(mode[0], 8))
                self._name(seq, path, node)
            elif node is not None and "O_TRUNC" in flags and self.live[node].kind == "file":
                self._effect(seq, ("data", node), "truncate", node, 0)
            self._table(call.pid)[call.result] = OpenFile(node, 0, "O_APPEND" in flags)
        elif name in ("write", "writev", "pwrite64", "pwritev", "pwritev2"):
            handle = self._open_file(call)
            data = b"".join(call.strings())[: call.result]
            if handle.node is None:
                if call.fd().number == 1 and data.startswith(REPORTED) and self.reported is None:
                    self.reported = seq
                return
            if name.startswith("pwrite"):
                offset = int(str(call.args[-1] if name != "pwritev2" else call.args[-2]))
            else:
                if handle.append:
                    handle.offset = len(self.live[handle.node].data)
                offset = handle.offset
                handle.offset += len(data)
            self._effect(seq, ("data", handle.node), "write", handle.node, offset, data)
        elif name == "lseek":
            self._open_file(call).offset = call.result
        elif name in ("ftruncate", "truncate"):
            node = (
                self._open_file(call).node
                if name == "ftruncate"
                else self.lookup(self._plain(call, 0))
            )
            if node is not None:
                self._effect(seq, ("data", node), "truncate", node, int(str(call.args[1])))
        elif name in ("fallocate", "copy_file_range", "sendfile"):
            if any(self._open_file(call, i).node is not None for i, a in enumerate(call.args)
                   if isinstance(a, Fd)):  # fmt: skip
                raise TraceError(f"{name} on a repository file is not modelled: {call}")
        elif name in ("rename", "renameat", "renameat2"):
            if name == "rename":
                source, target = self._plain(call, 0), self._plain(call, 1)
            else:
                source, target = self._at(call, 0, 1), self._at(call, 2, 3)
                if name == "renameat2" and "RENAME_EXCHANGE" in str(call.args[4:]):
                    raise TraceError(f"RENAME_EXCHANGE is not modelled: {call}")
            inside = (self._relative(source) is not None, self._relative(target) is not None)
            if inside == (False, False):
                return
            node, source_parent, target_parent = (
                self.lookup(source),
                self._parent(source),
                self._parent(target),
            )
            if node is None or source_parent is None or target_parent is None:
                raise TraceError(f"a rename across the repository's edge: {call}")
            self._effect(
                seq, ("names", target_parent[0]), "rename", *source_parent, *target_parent, node
            )
            self.names[node] = os.path.relpath(target, self.root)
        elif name in ("link", "linkat"):
            source, target = (
                (self._plain(call, 0), self._plain(call, 1))
                if name == "link"
                else (self._at(call, 0, 1), self._at(call, 2, 3))
            )
            node = self.lookup(source)
            if node is not None:
                self._name(seq, target, node)
        elif name in ("symlink", "symlinkat"):
            target_bytes = call.args[0]
            assert isinstance(target_bytes, bytes), call
            path = self._plain(call, 1) if name == "symlink" else self._at(call, 1, 2)
            if self._relative(path) is not None:
                self._name(seq, path, self._new(seq, "symlink", 0o777, target_bytes))
        elif name in ("unlink", "unlinkat", "rmdir"):
            path = self._at(call, 0, 1) if name == "unlinkat" else self._plain(call, 0)
            node, parent = self.lookup(path), self._parent(path)
            if node is not None and parent is not None:
                self._effect(seq, ("names", parent[0]), "unlink", *parent, node)
        elif name in ("mkdir", "mkdirat"):
            path = self._at(call, 0, 1) if name == "mkdirat" else self._plain(call, 0)
            mode = call.args[2] if name == "mkdirat" else call.args[1]
            if self._relative(path) is not None:
                self._name(seq, path, self._new(seq, "dir", int(str(mode), 8)))
        elif name in BARRIERS:
            node = self._open_file(call).node
            if node is not None:
                self.barriers.append((seq, node))
        elif name in ("sync", "syncfs"):
            self.barriers.append((seq, None))
        elif name == "close":
            self._table(call.pid).pop(call.fd().number, None)
        elif name in ("dup", "dup2", "dup3") or (
            name == "fcntl" and "F_DUPFD" in str(call.args[1])
        ):
            self._table(call.pid)[call.result] = self._open_file(call)
        elif name in ("clone", "clone3", "fork", "vfork"):
            flags = " ".join(a for a in call.args if isinstance(a, str))
            table = self._table(call.pid)
            self._tables[call.result] = table if "CLONE_FILES" in flags else dict(table)
        elif name == "mmap":
            fd = call.args[4] if len(call.args) > 4 else None
            shared = "MAP_SHARED" in str(call.args[3]) and "PROT_WRITE" in str(call.args[2])
            inside = isinstance(fd, Fd) and self._relative(fd.path) is not None
            if shared and inside and not str(getattr(fd, "path", "")).endswith("-shm"):
                raise TraceError(f"a repository file written through mmap: {call}")


def _parents_first(calls: list[Syscall]) -> list[Syscall]:
    """``strace -f`` can print a child's first calls before its parent's clone returns: move
    each clone/fork before its child's first call, so the child's descriptors are known."""
    first = {}
    for i, call in enumerate(calls):
        first.setdefault(call.pid, i)
    ordered = list(calls)
    for call in calls:
        if call.name in ("clone", "clone3", "fork", "vfork") and call.result > 0:
            at, child = ordered.index(call), first.get(call.result)
            if child is not None and child < at:
                ordered.pop(at)
                ordered.insert(child, call)
                first = {}
                for i, c in enumerate(ordered):
                    first.setdefault(c.pid, i)
    return ordered


# --- recording -----------------------------------------------------------------------------------


@dataclass
class Trace:
    """One real process under ``root``, traced: the tree before it, and what it did to it."""

    root: Path  # where every state is written back
    initial: Tree
    model: Model
    calls: list[Syscall]
    argv: list[str]
    input: bytes
    stdout: bytes

    @property
    def reported(self) -> int | None:
        """The system call that wrote ``Success`` to the standard output."""
        return self.model.reported


def trace(
    root: Path,
    argv: Sequence[str],
    *,
    input: bytes = b"",
    log: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Trace:
    """Run ``argv`` under strace and follow what it did to the tree of ``root``.

    Raises:
        TraceError: the process failed, or its trace cannot be followed faithfully (the model's
            final tree must be the one on disk).
    """
    root = root.resolve()
    umask = os.umask(0o022)
    os.umask(umask)
    initial = load_tree(root)
    log = log or root.parent / f"{root.name}.strace"
    done = run_traced(argv, log, SYSCALLS, data=True, input=input, env=env, check=False)
    if done.returncode != 0:
        raise TraceError(f"the traced process failed ({done.returncode}): {done.stderr!r}")
    calls = _parents_first(parse(log))
    model = Model(root, initial, umask)
    for seq, call in enumerate(calls):
        model.follow(seq, call)
    # The model must end where the disk did: the replay is checked against the real outcome.
    if digest(model.live) != digest(load_tree(root)):
        raise TraceError("replaying the trace does not give the tree the process left")
    return Trace(root, initial, model, calls, list(argv), input, done.stdout)


@dataclass
class Recording(Trace):
    """One real ``applyonce apply``, traced, and what it reported."""

    commit: str  # the branch's tip after it: the commit it reported
    branch: str
    call_id: str
    # A group's calls (:func:`record_group`): each call's ID and the commit it reported; empty
    # for one call (``call_id``, ``commit``).
    group: dict[str, str] = field(default_factory=dict)

    @property
    def commits(self) -> dict[str, str]:
        """Each recorded call's ID and the commit it reported."""
        return self.group or {self.call_id: self.commit}


def record(
    root: Path,
    patch: str,
    args: Sequence[str] = (),
    *,
    branch: str = "main",
    env: Mapping[str, str] | None = None,
) -> Recording:
    """Run ``applyonce apply - --repo ROOT ARGS`` on ``patch`` under strace and model it."""
    root = root.resolve()
    argv = [sys.executable, "-m", "applyonce", "apply", "-", "--repo", str(root), *args]
    traced = trace(root, argv, input=patch.encode(), env=env)
    if traced.reported is None:
        raise TraceError(f"the call never wrote {REPORTED!r} to its standard output")
    commit = _git(root, "rev-parse", f"refs/heads/{branch}").strip()
    call_id = _git(root, "log", "-1", "--format=%(trailers:key=Call-Id,valueonly)", commit).strip()
    return Recording(**vars(traced), commit=commit, branch=branch, call_id=call_id)


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


# The recorded call: a Codex patch that updates a file, adds one in a new directory and deletes
# one, in a repository whose state directory is new (``first``: the call creates the ledger, the
# receipts and their directories) or already there (``later``: after one earlier call).
FILES = {
    "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
    "src/util.py": "VALUE = 1\n",
    "README.md": "# demo\n",
}
PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def greet(name):
-    return 'hello ' + name
+    return f'hello {name}!'
*** Add File: tests/test_app.py
+from src.app import greet
+assert greet('x') == 'hello x!'
*** Delete File: src/util.py
*** End Patch
"""
EARLIER = "*** Begin Patch\n*** Add File: notes.txt\n+an earlier call\n*** End Patch\n"
SCENARIOS = ("first", "later")


def prepare(root: Path, scenario: str) -> Path:
    """The repository of ``scenario`` at ``root`` (see :data:`SCENARIOS`)."""
    from tests.conftest import make_repo, run_cli

    repo = make_repo(root, FILES)
    if scenario == "later":
        done = run_cli("apply", "-", "--repo", str(repo.path), input=EARLIER)
        assert done.returncode == 0, done.stderr
    elif scenario != "first":
        raise ValueError(f"no scenario {scenario!r}: {', '.join(SCENARIOS)}")
    return repo.path


# A group of calls through the Python API (docs/design.md §1, "Groups"): the patches (JSON on
# stdin) handed together to one executor, published as one chain. Says Success once every call
# is committed (a repeat: replayed), with their commits.
GROUP_DRIVER = """
import sys, orjson
from applyonce import Executor
from applyonce.flow.call.group import Request, apply_many
from applyonce.flow.options import CallOptions
patches = orjson.loads(sys.stdin.buffer.read())
with Executor(sys.argv[1]) as executor:
    results = apply_many(executor.context, [Request(p, CallOptions()) for p in patches])
done = [r.receipt for r in results if not isinstance(r, Exception)]
if len(done) < len(results) or any(r.status != "committed" for r in done):
    print(results, file=sys.stderr)
    sys.exit(1)
print("Success. " + " ".join(f"{r.call_id}:{r.commit}" for r in done))
"""


# The recorded group: three calls after an earlier one (``later``): a file added, the call above,
# a file updated.
GROUP_PATCHES = (
    "*** Begin Patch\n*** Add File: grouped.txt\n+one\n*** End Patch\n",
    PATCH,
    "*** Begin Patch\n*** Update File: README.md\n@@\n-# demo\n+# demo, grouped\n*** End Patch\n",
)


def record_group(root: Path, patches: Sequence[str] = GROUP_PATCHES) -> Recording:
    """Run a group of ``patches`` (:data:`GROUP_DRIVER`) under strace and model it."""
    import orjson

    root = root.resolve()
    argv = [sys.executable, "-c", GROUP_DRIVER, str(root)]
    traced = trace(root, argv, input=orjson.dumps(list(patches)))
    if traced.reported is None:
        raise TraceError(f"the group never wrote {REPORTED!r} to its standard output")
    said = traced.stdout.decode().split()[1:]
    group = dict(pair.split(":") for pair in said)
    commit = _git(root, "rev-parse", "refs/heads/main").strip()
    first = next(iter(group))
    return Recording(**vars(traced), commit=commit, branch="main", call_id=first, group=group)


# --- crash states --------------------------------------------------------------------------------


@dataclass
class CrashState:
    """One state the disk can hold after a power cut; ``cut``: the system calls before it ran."""

    cut: int
    variant: str
    where: str  # the system call the cut falls before or after, in words
    reported: bool  # the cut is after the call wrote "Success"
    tree: Tree
    digest: str
    same: list[tuple[int, str]] = field(default_factory=list)  # other cuts/variants, same bytes

    @property
    def label(self) -> str:
        return f"cut {self.cut} ({self.where}), {self.variant}"


def _cut_points(rec: Trace) -> dict[int, str]:
    """The cuts, by the number of calls before them, and where each falls."""
    model, calls = rec.model, rec.calls
    points: dict[int, str] = {}
    for seq, node in model.barriers:
        what = model.names.get(node, "?") if node is not None else "everything"
        points.setdefault(seq, f"before {calls[seq].name} {what}")
    for effect in model.effects:
        if effect.op[0] in ("rename", "unlink") or (
            effect.op[0] == "link" and calls[effect.seq].name.startswith("link")
        ):
            points.setdefault(
                effect.seq + 1, f"after {calls[effect.seq].name} {_op_name(model, effect)}"
            )
    if rec.reported is not None:
        points[rec.reported + 1] = "after the call wrote Success"
    points[len(calls)] = "after the call's last system call"
    return dict(sorted(points.items()))


def _op_name(model: Model, effect: Effect) -> str:
    kind, directory, name, *rest = effect.op
    where = f"{model.names.get(directory, '?')}/{name}"
    if kind == "rename":
        where += f" -> {model.names.get(rest[0], '?')}/{rest[1]}"
    return where.removeprefix("./")


def _state_tree(rec: Trace, cut: int, keep: set[int]) -> Tree:
    tree = copy.deepcopy(rec.initial)
    for effect in rec.model.effects:
        if effect.seq >= cut:
            break
        if effect.seq in keep or effect.owner[0] == "new":
            apply_effect(tree, effect)
    return tree


def crash_states(rec: Trace) -> tuple[list[CrashState], int]:
    """Every distinct crash state of ``rec`` (first by cut, then variant), and how many cuts
    and variants they stand for in all."""
    model = rec.model
    by_digest: dict[str, CrashState] = {}
    total = 0
    for cut, where in _cut_points(rec).items():
        synced: dict[tuple[str, int], int] = {}
        everything = -1
        for seq, node in model.barriers:
            if seq >= cut:
                break
            if node is None:
                everything = seq
            else:
                synced[("data", node)] = synced[("names", node)] = seq
        before = [e for e in model.effects if e.seq < cut and e.owner[0] != "new"]
        durable = {e.seq for e in before if e.seq < max(synced.get(e.owner, -1), everything)}
        pending: dict[tuple[str, int], set[int]] = {}
        for e in before:
            if e.seq not in durable:
                pending.setdefault(e.owner, set()).add(e.seq)
        every = {e.seq for e in before}
        variants = {"keep-all": every, "lose-all": durable}
        for owner, seqs in sorted(pending.items()):
            if len(pending) > 1 and not model.names.get(owner[1], "").endswith("-shm"):
                kind = "lose-data" if owner[0] == "data" else "lose-names"
                variants[f"{kind} {model.names.get(owner[1], '?')}"] = every - seqs
        for variant, keep in variants.items():
            total += 1
            tree = _state_tree(rec, cut, keep)
            key = digest(tree)
            reported = rec.reported is not None and cut > rec.reported
            if key in by_digest:
                known = by_digest[key]
                known.same.append((cut, variant))
                known.reported = known.reported or reported
                continue
            by_digest[key] = CrashState(cut, variant, where, reported, tree, key)
    return list(by_digest.values()), total


def sample(states: Sequence[CrashState], count: int) -> list[CrashState]:
    """``count`` of ``states`` (in their order: by cut, then variant), evenly spread over the
    call: the same ones every run of the same trace."""
    if count >= len(states):
        return list(states)
    return [states[i * len(states) // count] for i in range(count)]


# --- checking a state ----------------------------------------------------------------------------

# A lock file applyonce cannot prove its own is left to the user, with this advice.
_REMOVE_IT = re.compile(r"remove it with rm (\S+?)[);,]*(?:\s|$)")
ROUNDS = 3


@dataclass
class Verdict:
    """What recover and the repeated call made of a state."""

    state: CrashState
    problems: list[str]  # broken promises: each one a defect
    removed: list[str]  # lock files removed by hand, as the refusal said (git's own after a cut)
    notes: list[str]  # what else was seen: a checkout out of step, a refusal on the way
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems


def _run(argv: Sequence[str], *, input: bytes | None = None, env: Mapping[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        argv,
        input=input.decode() if input is not None else None,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=dict(env if env is not None else os.environ),
    )


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    return (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or [""])[-1]


def _settle(rec: Recording, env: Mapping[str, str] | None, verdict: Verdict) -> bool:
    """``recover``, then the call again, as a user would after the cut: where either says a lock
    file it cannot prove its own is in the way and to remove it (a refusal, or the warning of a
    call that committed but could not update the checkout), that lock is removed and both run
    again, at most :data:`ROUNDS` times. True when the call was settled."""
    app = [sys.executable, "-m", "applyonce"]
    for _ in range(ROUNDS):
        advice: set[str] = set()
        repeated = None
        for name, argv, data in (
            ("recover", [*app, "recover", "--repo", str(rec.root)], None),
            ("repeat", rec.argv, rec.input),
        ):
            done = _run(argv, input=data, env=env)
            if done.returncode == 3 or "Traceback" in done.stderr:
                verdict.problems.append(f"{name}: internal error: {_last_line(done)}")
                return False
            if done.returncode != 0:
                verdict.notes.append(f"{name}: exit {done.returncode}: {_last_line(done)}")
            advice.update(_REMOVE_IT.findall(done.stdout + done.stderr))
            repeated = done
        assert repeated is not None
        locks = sorted(p for p in advice if Path(p).is_relative_to(rec.root) and
                       p.endswith(".lock") and Path(p).is_file())  # fmt: skip
        if repeated.returncode == 0 and not locks:
            # A repeat of a call that committed says it replayed first, then its stored result.
            said = repeated.stdout
            if said.startswith(REPLAY_HEAD):
                said = said.partition(STORED_MARK)[2]
            if not said.startswith(REPORTED.decode()):
                verdict.problems.append(f"repeat: exit 0, no {REPORTED!r}: {repeated.stdout!r}")
            return True
        if not locks:
            break
        for lock in locks:
            os.unlink(lock)
            verdict.removed.append(os.path.relpath(lock, rec.root))
    verdict.problems.append("the call is not settled: " + "; ".join(verdict.notes[-2:]))
    return False


def check(rec: Recording, state: CrashState, *, env: Mapping[str, str] | None = None) -> Verdict:
    """Write ``state`` at the repository's path, recover and repeat the call (removing a lock
    left to the user where the refusal says so), then check the promises."""
    started = time.perf_counter()
    materialize(state.tree, rec.root)
    verdict = Verdict(state, [], [], [], 0.0)
    problems = verdict.problems
    settled = _settle(rec, env, verdict)
    git = ["git", "-C", str(rec.root)]
    log = _run([*git, "log", "--format=%H %(trailers:key=Call-Id,valueonly)",
                f"refs/heads/{rec.branch}"], env=env)  # fmt: skip
    if log.returncode != 0:
        problems.append(f"git log: {log.stderr.strip()}")
    for call_id, commit in rec.commits.items():
        carrying = [
            line.split()[0] for line in log.stdout.splitlines() if line.split()[1:] == [call_id]
        ]
        if log.returncode == 0 and settled and len(carrying) != 1:
            problems.append(f"{len(carrying)} commits carry {call_id[:12]} on {rec.branch}")
        if state.reported and carrying != [commit]:
            problems.append(f"the reported commit {commit[:12]} is not the call's commit now")
    fsck = _run([*git, "fsck", "--strict", "--no-dangling"], env=env)
    if fsck.returncode != 0:
        problems.append(f"git fsck --strict: {(fsck.stdout + fsck.stderr).strip()[:300]}")
    audit = _run([sys.executable, "-m", "applyonce", "audit", "--repo", str(rec.root)], env=env)
    if audit.returncode != 0:
        problems.append(f"audit: exit {audit.returncode}: {audit.stdout.strip()[-300:]}")
    ledger = rec.root / ".git" / "applyonce" / "ledger.sqlite3"
    try:
        with contextlib.closing(sqlite3.connect(ledger)) as db:
            integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
            rows = {
                call_id: db.execute(
                    "SELECT state FROM calls WHERE call_id = ?", (call_id,)
                ).fetchone()
                for call_id in rec.commits
            }
        if integrity != "ok":
            problems.append(f"ledger: {integrity}")
        for call_id, row in rows.items():
            if integrity == "ok" and (row is None or row[0] != "committed"):
                problems.append(
                    f"ledger: {call_id[:12]} is {row[0] if row else 'missing'}, not committed"
                )
    except sqlite3.Error as exc:
        problems.append(f"ledger: {exc}")
    # The repository has no change of the user's: anything git status shows is the call's sync
    # left undone (docs/design.md §7: the checkout in sync for the touched paths).
    status = _run([*git, "status", "--porcelain", "--untracked-files=all"], env=env)
    if settled and status.stdout.strip():
        problems.append(f"checkout not in sync: {' '.join(status.stdout.split())}")
    verdict.seconds = time.perf_counter() - started
    return verdict
