"""The Git situations users really have, each built for real in a temp folder.

Every builder takes an empty folder and returns a :class:`Situation`: the repository a call is
made in, the patch it sends, what the branch must hold after it, which work tree follows the
branch, and what is expected — a correct success, a clean one-line refusal, or either where the
project may choose (:class:`Expect`). The builders use the real ``git`` only, as a user would;
most start from a clone of a bare ``origin`` reached by a ``file://`` URL, with the things a
user's clone has lying around (a ``FETCH_HEAD``, an ``ORIG_HEAD``, other branches, a tag, a
remote-tracking branch, an uncommitted edit, a staged edit and an untracked file on paths the
patch does not touch), so the matrix sees whether a call leaves them alone.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from tests.conftest import git, make_repo, write_files

MAIN = "refs/heads/main"

BASE_FILES = {
    "src/app.py": "def greet(name):\n    return 'hello ' + name\n",
    "src/util.py": "VALUE = 1\n",
    "docs/notes.md": "# notes\n\nfirst\n",
    "README.md": "# demo\n",
}

# Updates two files, one of them outside a sparse checkout's cone (``src``), and adds a third.
PATCH = """*** Begin Patch
*** Update File: src/app.py
@@ def greet(name):
-    return 'hello ' + name
+    return f'hello {name}!'
*** Update File: docs/notes.md
@@
 first
+second
*** Add File: tests/test_app.py
+from src.app import greet
+assert greet('x') == 'hello x!'
*** End Patch
"""
NEW_APP = b"def greet(name):\n    return f'hello {name}!'\n"
BLOBS: dict[str, bytes | None] = {
    "src/app.py": NEW_APP,
    "docs/notes.md": b"# notes\n\nfirst\nsecond\n",
    "tests/test_app.py": b"from src.app import greet\nassert greet('x') == 'hello x!'\n",
}
# ``--dirty commit``: the user's own line under the function the patch changes.
USER_LINE = b"# a note of the user's\n"
DIRTY = ("src/app.py", BASE_FILES["src/app.py"].encode() + USER_LINE, NEW_APP + USER_LINE)

# What the concurrency cells send beside PATCH, at the same time.
EXTRA_CALLS: tuple[tuple[str, dict[str, bytes | None]], ...] = tuple(
    (
        f"*** Begin Patch\n*** Add File: extra/{name}.txt\n+{name}\n*** Add File: extra/{name}.md\n+# {name}\n*** End Patch\n",
        {f"extra/{name}.txt": f"{name}\n".encode(), f"extra/{name}.md": f"# {name}\n".encode()},
    )
    for name in ("one", "two")
)


@dataclass(frozen=True)
class Expect:
    """What a call in a situation may do: land (``supported``), or stop with one ``error:`` line
    and one of ``exits`` whose text matches ``message`` and nothing written. Both may be allowed
    where the project may choose (a SHA-256 repository, a lagging checkout)."""

    supported: bool = True
    exits: tuple[int, ...] = ()
    message: str = r"."

    @property
    def refusable(self) -> bool:
        return bool(self.exits)


SUPPORTED = Expect()


def refused(message: str, *exits: int) -> Expect:
    return Expect(supported=False, exits=exits or (2, 4), message=message)


def either(message: str, *exits: int) -> Expect:
    return Expect(supported=True, exits=exits or (2, 4), message=message)


@dataclass
class Situation:
    """A repository in one Git state, ready for a call."""

    repo: Path  # where the call is made (``--repo`` and the process's cwd)
    patch: str = PATCH
    blobs: dict[str, bytes | None] = field(default_factory=lambda: dict(BLOBS))
    branch: str = MAIN
    args: tuple[str, ...] = ()  # more options for apply (e.g. --branch)
    follower: Path | None = None  # the work tree that checks out ``branch`` (None: none)
    checkouts: tuple[Path, ...] = ()  # every work tree of the repository
    # ``--dirty commit``: the path, the user's bytes in the work tree, its blob after the call.
    dirty: tuple[str, bytes, bytes | None] | None = DIRTY
    expect: Expect = SUPPORTED
    # With --remote, when it differs (a shallow clone: deepened from the remote, not refused).
    remote_expect: Expect | None = None
    origin: Path | None = None  # the bare origin the clone came from
    # Paths where the follower's work tree lags the branch: a success must bring them along.
    lagging: tuple[str, ...] = ()
    # Paths outside a sparse checkout: their index entries follow the branch with the
    # skip-worktree bit, and the work tree does not get them (as 'git pull' leaves them).
    outside: tuple[str, ...] = ()
    # A git process looping while the cell runs, and what it may change (refs, pseudo-refs).
    loop: tuple[str, ...] | None = None
    volatile: tuple[str, ...] = ()
    # After a refusal: what the user does on the error's hint, after which the call must land.
    cure: tuple[tuple[str, ...], ...] = ()

    def audit_args(self) -> tuple[str, ...]:
        return ("--ref", self.branch) if "--branch" in self.args else ()


# --- building blocks -------------------------------------------------------------------------


def _commit(repo: Path, files: dict[str, str], message: str) -> None:
    write_files(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def make_origin(root: Path, *, files: dict[str, str] | None = None) -> Path:
    """A bare ``origin`` with a short history on ``main`` and a ``feature`` branch, serving
    partial clones."""
    seed = make_repo(root / "seed", dict(files if files is not None else BASE_FILES)).path
    _commit(seed, {"LICENSE": "MIT\n"}, "license")
    git(seed, "checkout", "-q", "-b", "feature")
    _commit(seed, {"feature.txt": "feature\n"}, "feature")
    git(seed, "checkout", "-q", "main")
    _commit(seed, {"CHANGES.md": "- first release\n"}, "changes")
    origin = root / "origin.git"
    git(root, "clone", "-q", "--bare", str(seed), str(origin))
    git(origin, "config", "uploadpack.allowFilter", "true")
    git(origin, "config", "uploadpack.allowAnySHA1InWant", "true")
    return origin


def url(path: Path) -> str:
    return f"file://{path}"


def clone(origin: Path, into: Path, *options: str) -> Path:
    git(into.parent, "clone", "-q", *options, url(origin), str(into))
    git(into, "config", "core.autocrlf", "false")
    return into


def user_clutter(repo: Path, *, edits: bool = True) -> None:
    """What a user's clone has lying around: FETCH_HEAD, ORIG_HEAD, a local branch, a tag, and
    (``edits``) an unstaged edit, a staged edit and an untracked file the patch does not touch."""
    if (repo / ".git").exists() and git(repo, "remote").strip():
        git(repo, "fetch", "-q", "origin")
    git(repo, "update-ref", "ORIG_HEAD", "HEAD")
    git(repo, "branch", "topic")
    git(repo, "tag", "v0")
    if edits:
        (repo / "README.md").write_bytes(b"# demo\nmy unsaved line\n")
        (repo / "src" / "util.py").write_bytes(b"VALUE = 10\n")
        git(repo, "add", "src/util.py")
        (repo / "notes.txt").write_bytes(b"my untracked notes\n")


def cloned(root: Path, *options: str) -> Situation:
    origin = make_origin(root)
    repo = clone(origin, root / "clone", *options)
    user_clutter(repo)
    return Situation(repo, follower=repo, checkouts=(repo,), origin=origin)


# --- the states --------------------------------------------------------------------------------


def fresh_clone(root: Path) -> Situation:
    return cloned(root)


# A shallow history cannot tell that a call is not on the branch (its commit may lie below the
# boundary): without --remote a call is refused until the clone is made whole; with --remote
# the clone is deepened from it.
INCOMPLETE = refused(r"incomplete.*git fetch --unshallow", 4)
UNSHALLOW = (("fetch", "-q", "--unshallow"),)


def shallow(root: Path) -> Situation:
    sit = cloned(root, "--depth", "1")
    assert (sit.repo / ".git" / "shallow").exists()
    return replace(sit, expect=INCOMPLETE, remote_expect=SUPPORTED, cure=UNSHALLOW)


def deepened(root: Path) -> Situation:
    origin = make_origin(root)
    repo = clone(origin, root / "clone", "--depth", "1")
    git(repo, "fetch", "-q", "--deepen=1")
    user_clutter(repo)
    sit = Situation(repo, follower=repo, checkouts=(repo,), origin=origin)
    return replace(sit, expect=INCOMPLETE, remote_expect=SUPPORTED, cure=UNSHALLOW)


def partial_blobless(root: Path) -> Situation:
    sit = cloned(root, "--filter=blob:none")
    assert git(sit.repo, "config", "remote.origin.promisor").strip() == "true"
    return sit


def partial_treeless(root: Path) -> Situation:
    sit = cloned(root, "--filter=tree:0")
    assert git(sit.repo, "config", "remote.origin.promisor").strip() == "true"
    return sit


UNBORN_PATCH = (
    "*** Begin Patch\n*** Add File: src/app.py\n+def greet(name):\n+    return name\n"
    "*** Add File: README.md\n+# new project\n*** End Patch\n"
)
UNBORN_BLOBS: dict[str, bytes | None] = {
    "src/app.py": b"def greet(name):\n    return name\n",
    "README.md": b"# new project\n",
}


def unborn_with_remote(root: Path) -> Situation:
    """``git init`` + ``git remote add origin`` of an empty bare repository, nothing fetched."""
    origin = root / "origin.git"
    make_repo(origin, bare=True)
    repo = make_repo(root / "clone").path
    git(repo, "remote", "add", "origin", url(origin))
    (repo / "notes.txt").write_bytes(b"my untracked notes\n")
    return Situation(
        repo,
        patch=UNBORN_PATCH,
        blobs=dict(UNBORN_BLOBS),
        follower=repo,
        checkouts=(repo,),
        dirty=None,
        origin=origin,
    )


def unborn(root: Path) -> Situation:
    """Plain ``git init``: no commit, no remote."""
    repo = make_repo(root / "repo").path
    (repo / "notes.txt").write_bytes(b"my untracked notes\n")
    return Situation(
        repo,
        patch=UNBORN_PATCH,
        blobs=dict(UNBORN_BLOBS),
        follower=repo,
        checkouts=(repo,),
        dirty=None,
    )


def detached(root: Path) -> Situation:
    """HEAD detached at main's tip; no ``--branch``: there is no branch to land on."""
    sit = cloned(root)
    git(sit.repo, "checkout", "-q", "--detach")
    expect = refused(r"detached|HEAD|--branch")
    return replace(
        sit, follower=None, dirty=None, expect=expect, cure=(("checkout", "-q", "main"),)
    )


def detached_with_branch(root: Path) -> Situation:
    """HEAD detached at main's tip, the call names ``--branch main``: main moves, the detached
    checkout stays where it is (it does not check out main)."""
    sit = cloned(root)
    git(sit.repo, "checkout", "-q", "--detach")
    return replace(sit, args=("--branch", "main"), follower=None)


def _linked(root: Path) -> tuple[Situation, Path]:
    sit = cloned(root)
    linked = root / "linked"
    git(sit.repo, "branch", "work", "main")
    git(sit.repo, "worktree", "add", "-q", str(linked), "work")
    git(sit.repo, "push", "-q", "origin", "work")  # so the --remote columns have its branch
    (linked / "linked-notes.txt").write_bytes(b"notes in the linked work tree\n")
    return sit, linked


def branch_in_other_worktree(root: Path) -> Situation:
    """The call is made in the main work tree for the branch a linked work tree has checked out:
    the linked one follows, the main one is left alone."""
    sit, linked = _linked(root)
    return replace(
        sit,
        branch="refs/heads/work",
        args=("--branch", "work"),
        follower=linked,
        checkouts=(sit.repo, linked),
        dirty=None,
    )


def from_linked_worktree(root: Path) -> Situation:
    """The call is made from a linked work tree, on its own branch."""
    sit, linked = _linked(root)
    return replace(
        sit, repo=linked, branch="refs/heads/work", follower=linked, checkouts=(sit.repo, linked)
    )


def sparse_cone(root: Path) -> Situation:
    """A cone-mode sparse checkout of ``src``: the patch also changes ``docs/notes.md`` and adds
    ``tests/test_app.py``, both outside the cone."""
    sit = cloned(root)
    git(sit.repo, "sparse-checkout", "set", "--cone", "src")
    assert not (sit.repo / "docs" / "notes.md").exists()
    return replace(sit, outside=("docs/notes.md", "tests/test_app.py"))


def partial_sparse(root: Path) -> Situation:
    """A blobless clone with a sparse checkout of ``src`` (the monorepo set-up): the blob of
    ``docs/notes.md``, which the patch changes, was never fetched."""
    origin = make_origin(root)
    repo = clone(origin, root / "clone", "--filter=blob:none", "--sparse")
    git(repo, "sparse-checkout", "set", "--cone", "src")
    user_clutter(repo)
    missing = git(repo, "rev-list", "--objects", "--missing=print", "HEAD")
    assert any(line.startswith("?") for line in missing.splitlines()), "no blob is missing"
    return Situation(
        repo,
        follower=repo,
        checkouts=(repo,),
        origin=origin,
        expect=either(r"."),
        outside=("docs/notes.md", "tests/test_app.py"),
    )


def sparse_index(root: Path) -> Situation:
    """A sparse index (``index.sparse``), which the project documents as refused."""
    sit = cloned(root)
    git(sit.repo, "sparse-checkout", "init", "--cone", "--sparse-index")
    git(sit.repo, "sparse-checkout", "set", "src")
    cure = (("sparse-checkout", "init", "--no-sparse-index"),)
    return replace(sit, expect=either(r"sparse index", 2), cure=cure)


def submodule(root: Path) -> Situation:
    """A superproject with a submodule (added from a local repository) whose work tree has an
    edit of the user's."""
    lib = make_repo(root / "lib", {"lib.txt": "library\n"}).path
    repo = make_repo(root / "repo", BASE_FILES).path
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "vendor/lib")
    git(repo, "commit", "-q", "-m", "vendor lib")
    user_clutter(repo)
    (repo / "vendor" / "lib" / "lib.txt").write_bytes(b"library, edited\n")
    return Situation(repo, follower=repo, checkouts=(repo,))


def split_index(root: Path) -> Situation:
    sit = cloned(root)
    git(sit.repo, "config", "core.splitIndex", "true")
    git(sit.repo, "update-index", "--split-index")
    assert list((sit.repo / ".git").glob("sharedindex.*"))
    cure = (("config", "core.splitIndex", "false"), ("update-index", "--no-split-index"))
    return replace(sit, expect=either(r"split index", 2), cure=cure)


def untracked_cache(root: Path) -> Situation:
    sit = cloned(root)
    git(sit.repo, "config", "core.untrackedCache", "true")
    git(sit.repo, "config", "core.fsmonitor", "false")
    git(sit.repo, "update-index", "--untracked-cache")
    git(sit.repo, "status", "--porcelain")  # fills the cache (the UNTR extension)
    return sit


def fsmonitor_hook(root: Path) -> Situation:
    """``core.fsmonitor`` names a hook (protocol 2) that says everything may have changed."""
    sit = cloned(root)
    hook = root / "fsmonitor-hook"
    hook.write_text("#!/bin/sh\nprintf 'token-1\\0/\\0'\n")
    hook.chmod(0o755)
    git(sit.repo, "config", "core.fsmonitor", str(hook))
    git(sit.repo, "config", "core.fsmonitorHookVersion", "2")
    git(sit.repo, "config", "core.untrackedCache", "true")
    git(sit.repo, "status", "--porcelain")  # writes the FSMN extension
    return sit


CRLF_FILES = {
    "src/app.py": "def greet(name):\n    return 'hello ' + name\n",  # LF in Git, CRLF on disk
    "docs/notes.md": "# notes\r\n\r\nfirst\r\n",  # CRLF in Git itself
    "src/util.py": "VALUE = 1\n",
    "README.md": "# demo\n",
}


def autocrlf(root: Path) -> Situation:
    """``core.autocrlf=true`` on a clone whose files are LF in Git and one that is CRLF in Git."""
    origin = make_origin(root, files=CRLF_FILES)
    repo = root / "clone"
    git(root, "clone", "-q", "-c", "core.autocrlf=true", url(origin), str(repo))
    assert (repo / "src" / "app.py").read_bytes().endswith(b"\r\n")
    user_clutter(repo)
    blobs = dict(BLOBS, **{"docs/notes.md": b"# notes\r\n\r\nfirst\r\nsecond\r\n"})
    dirty = (
        "src/app.py",
        b"def greet(name):\r\n    return 'hello ' + name\r\n" + USER_LINE.replace(b"\n", b"\r\n"),
        NEW_APP + USER_LINE,
    )
    return Situation(
        repo, blobs=blobs, follower=repo, checkouts=(repo,), dirty=dirty, origin=origin
    )


SCRIPT_PATCH = PATCH.replace(
    "*** Add File: tests/test_app.py",
    "*** Update File: bin/run.sh\n@@\n-echo one\n+echo two\n*** Add File: tests/test_app.py",
)


def filemode_false(root: Path) -> Situation:
    """``core.fileMode=false`` with an executable script whose work-tree file lost its x bit (as
    on a file system without modes): Git keeps 100755, so must a call, and ``--dirty commit``."""
    repo = make_repo(root / "repo", {**BASE_FILES, "bin/run.sh": "#!/bin/sh\necho one\n"}).path
    git(repo, "update-index", "--chmod=+x", "bin/run.sh")
    git(repo, "commit", "-q", "-m", "executable")
    git(repo, "config", "core.fileMode", "false")
    (repo / "bin" / "run.sh").chmod(0o644)
    (repo / "src" / "util.py").chmod(0o755)  # ignored by Git too: not a change
    user_clutter(repo)
    assert "bin/run.sh" not in git(repo, "status", "--porcelain")
    blobs = dict(BLOBS, **{"bin/run.sh": b"#!/bin/sh\necho two\n"})
    dirty = ("bin/run.sh", b"#!/bin/sh\necho one\n# mine\n", b"#!/bin/sh\necho two\n# mine\n")
    return Situation(
        repo, patch=SCRIPT_PATCH, blobs=blobs, follower=repo, checkouts=(repo,), dirty=dirty
    )


def sha256(root: Path) -> Situation:
    """``git init --object-format=sha256``: supported, or refused in one line."""
    repo = root / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main", "--object-format=sha256")
    git(repo, "config", "core.autocrlf", "false")
    _commit(repo, dict(BASE_FILES), "base")
    user_clutter(repo)
    return Situation(
        repo, follower=repo, checkouts=(repo,), expect=either(r"sha-?256|object format|hash", 2)
    )


def lagging_ref(root: Path) -> Situation:
    """The branch was moved ahead of the checkout by someone else (``git update-ref`` to a commit
    made in another clone): the work tree and index still show the old commit. A call brings the
    checkout along first, or refuses."""
    sit = cloned(root)
    assert sit.origin is not None
    other = clone(sit.origin, root / "elsewhere")
    _commit(other, {"LICENSE": "Apache-2.0\n", "src/extra.py": "EXTRA = 1\n"}, "elsewhere")
    newer = git(other, "rev-parse", "HEAD").strip()
    git(sit.repo, "fetch", "-q", str(other), "main")
    git(sit.repo, "update-ref", MAIN, newer)
    return replace(sit, lagging=("LICENSE", "src/extra.py"), expect=either(r"."))


SETUP_PATCH = (
    "*** Begin Patch\n*** Update File: LICENSE\n@@\n-MIT\n+Apache-2.0\n"
    "*** Add File: src/extra.py\n+EXTRA = 1\n*** End Patch\n"
)


def lagging_after_skipped_sync(root: Path) -> Situation:
    """An earlier call published while the user held ``index.lock``, so its sync was skipped:
    the branch is ahead of the checkout by applyonce's own commit. (The earlier call runs in
    this process, its wait for the lock cut short: it is the state being built, not the call
    under test.)"""
    from applyonce import Executor
    from applyonce.git import indexlock

    sit = cloned(root)
    lock = sit.repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    wait, indexlock.INDEX_LOCK_WAIT_S = indexlock.INDEX_LOCK_WAIT_S, 0.05
    executor = Executor(sit.repo)
    try:
        receipt = executor.apply(SETUP_PATCH)
    finally:
        executor.close()
        indexlock.INDEX_LOCK_WAIT_S = wait
        lock.unlink()
    assert receipt.status == "committed", receipt.output
    assert (sit.repo / "LICENSE").read_bytes() == b"MIT\n", (
        "the earlier call's sync was not skipped"
    )
    return replace(sit, lagging=("LICENSE", "src/extra.py"), expect=either(r"."))


EMPTYING_PATCH = "".join(
    f"*** Delete File: {path}\n" for path in ("CHANGES.md", "LICENSE", *sorted(BASE_FILES))
).join(("*** Begin Patch\n", "*** End Patch\n"))


def empty_tree(root: Path) -> Situation:
    """A patch that deletes every file: the branch's tree becomes the empty tree."""
    origin = make_origin(root)
    repo = clone(origin, root / "clone")
    user_clutter(repo, edits=False)
    (repo / "notes.txt").write_bytes(b"my untracked notes\n")
    blobs: dict[str, bytes | None] = dict.fromkeys(("CHANGES.md", "LICENSE", *BASE_FILES))
    return Situation(
        repo,
        patch=EMPTYING_PATCH,
        blobs=blobs,
        follower=repo,
        checkouts=(repo,),
        dirty=("README.md", b"# demo\nmy line\n", None),
        origin=origin,
    )


def bare(root: Path) -> Situation:
    """A bare clone (a server-side agent): no work tree to follow."""
    origin = make_origin(root)
    repo = root / "bare.git"
    git(root, "clone", "-q", "--bare", url(origin), str(repo))
    git(repo, "update-ref", "ORIG_HEAD", "HEAD")
    git(repo, "tag", "v0")
    return Situation(repo, follower=None, checkouts=(), dirty=None, origin=origin)


def _looping(command: str, *, volatile: tuple[str, ...] = ()) -> Callable[[Path], Situation]:
    def build(root: Path) -> Situation:
        sit = cloned(root)
        return replace(sit, loop=tuple(command.split()), volatile=volatile)

    build.__doc__ = f"A fresh clone while ``git {command}`` runs in a loop."
    return build


concurrent_gc = _looping("gc -q")
concurrent_repack = _looping("repack -a -d -q")
concurrent_maintenance = _looping(
    "maintenance run --task=commit-graph --task=loose-objects --task=incremental-repack"
)
concurrent_fetch = _looping("fetch -q origin", volatile=("FETCH_HEAD", "refs/remotes/"))


@contextlib.contextmanager
def git_loop(sit: Situation, stop: Path) -> Iterator[None]:
    """``git <loop>`` over and over in the situation's repository while the body runs (a real
    process), until ``stop`` exists: the git it is running then ends as it would, so any lock
    left afterwards is not the loop's."""
    if sit.loop is None:
        yield
        return
    command = " ".join(sit.loop)
    script = f'while [ ! -e "$2" ]; do git -C "$1" {command} >/dev/null 2>&1; done'
    proc = subprocess.Popen(["sh", "-c", script, "loop", str(sit.repo), str(stop)])
    try:
        yield
    finally:
        stop.touch()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise


@dataclass(frozen=True)
class State:
    """A row of the matrix: its builder, and which columns apply to it."""

    build: Callable[[Path], Situation]
    remote: bool = False  # the ``--remote origin`` columns (a clone of a bare origin)
    dirty: bool = True  # the ``--dirty commit`` column (a tracked file the patch touches)
    short: bool = False  # a git loop runs: only the columns that write, to keep it short


STATES: dict[str, State] = {
    "fresh-clone": State(fresh_clone, remote=True),
    "shallow": State(shallow, remote=True),
    "deepened": State(deepened, remote=True),
    "partial-blobless": State(partial_blobless, remote=True),
    "partial-treeless": State(partial_treeless, remote=True),
    "unborn-origin": State(unborn_with_remote, remote=True, dirty=False),
    "unborn": State(unborn, dirty=False),
    "detached": State(detached, dirty=False),
    "detached-branch": State(detached_with_branch, remote=True),
    "worktree-other": State(branch_in_other_worktree, dirty=False),
    "worktree-linked": State(from_linked_worktree, remote=True),
    "sparse-cone": State(sparse_cone, remote=True),
    "partial-sparse": State(partial_sparse, remote=True),
    "sparse-index": State(sparse_index),
    "submodule": State(submodule),
    "split-index": State(split_index),
    "untracked-cache": State(untracked_cache),
    "fsmonitor-hook": State(fsmonitor_hook),
    "autocrlf": State(autocrlf),
    "filemode-false": State(filemode_false),
    "sha256": State(sha256),
    "lagging-ref": State(lagging_ref, remote=True),
    "lagging-sync": State(lagging_after_skipped_sync, remote=True),
    "empty-tree": State(empty_tree, remote=True),
    "bare": State(bare, remote=True, dirty=False),
    "gc-loop": State(concurrent_gc, short=True),
    "repack-loop": State(concurrent_repack, short=True),
    "maintenance-loop": State(concurrent_maintenance, short=True),
    "fetch-loop": State(concurrent_fetch, remote=True, short=True),
}
