"""What a call costs on the checkout path does not grow with the repository or its history:

* the checkout's index is read at most once per call, and not at all in a long-lived process
  while the index file is the one applyonce wrote last (counted with strace: every open of the
  index file for reading, libgit2's own included);
* the sync starts no thread to filter a file no filter applies to;
* the sync reads no commit below the call's base (the history below is made unreadable);
* a repository with no checkout of the branch never asks the ledger for unsynced calls, and
  that question is answered from an index of the unsynced calls, not a scan.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pygit2
import pytest

from applyonce.executor import Executor
from applyonce.git.checkouts import Checkouts
from applyonce.state.sqlite.ledger import SqliteLedger
from tests.conftest import Repo, make_repo

FILES = {f"src/m{i}.py": f"VALUE = {i}\n" for i in range(6)}


def _patch(call: int, files: range) -> str:
    """Three-file patches, fresh each call: each file's one line is replaced."""
    body = "".join(
        f"*** Update File: src/m{i}.py\n@@\n-VALUE = {i if call == 0 else f'{i} # {call - 1}'}\n"
        f"+VALUE = {i} # {call}\n"
        for i in files
    )
    return f"*** Begin Patch\n{body}*** End Patch\n"


# A long-lived process: calls in a loop, a marker file opened before each (strace shows it), and,
# before the last call, the user's git add (run in a child, whose opens are not counted).
LOOP = r"""
import subprocess, sys
from pathlib import Path
from applyonce.executor import Executor
repo, markers, patches = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
executor = Executor(repo)
for n, patch in enumerate(patches):
    if n == len(patches) - 1:
        (repo / "user.txt").write_text("the user's\n")
        subprocess.run(["git", "-C", str(repo), "add", "user.txt"], check=True)
    open(markers / f"call-{n}", "w").close()
    assert executor.apply(patch).status == "committed"
open(markers / "done", "w").close()
"""


def _index_reads(trace: str, index: Path) -> list[int]:
    """Reads of the content of ``index`` by the looping process (libgit2's, applyonce's; not
    the 20-byte checksum libgit2 reads to tell whether a file changed), counted between the
    call markers. The index is small: a read of its content is one read() call."""
    counts: list[int] = []
    looper = None
    for line in trace.splitlines():
        if re.search(r'openat\([^,]+, "[^"]*/call-\d+"', line):
            looper = line.split()[0]
            counts.append(0)
            continue
        found = re.match(rf"(\d+) +read\(\d+<{re.escape(str(index))}>, .*\) = (\d+)$", line)
        if counts and found and found[1] == looper and int(found[2]) > 20:
            counts[-1] += 1
    return counts


def test_the_index_is_read_at_most_once_a_call_and_not_again_while_unchanged(
    tmp_path: Path,
) -> None:
    if shutil.which("strace") is None and not os.environ.get("APPLYONCE_REQUIRE_STRACE"):
        pytest.skip("strace is not installed (.ci/run installs it)")
    repo = make_repo(tmp_path / "repo", FILES)
    markers = tmp_path / "markers"
    markers.mkdir()
    trace = tmp_path / "trace"
    patches = [_patch(n, range(3)) for n in range(4)]
    strace = ["strace", "-f", "-y", "-e", "trace=openat,read", "-o", str(trace)]
    done = subprocess.run(
        [*strace, sys.executable, "-c", LOOP, str(repo.path), str(markers), *patches],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reads = _index_reads(trace.read_text(), (repo.path / ".git" / "index").resolve())
    # The first call reads it once; the next ones find it as their own sync left it; after the
    # user's git add, once again.
    assert reads == [1, 0, 0, 1], reads
    assert repo.git("status", "--porcelain").strip() == "A  user.txt"
    assert (repo.path / "src/m0.py").read_text() == "VALUE = 0 # 3\n"


def test_the_sync_starts_no_thread_for_a_file_no_filter_applies_to(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    (repo.path / ".gitattributes").write_text("*.bin binary\n")
    repo.git("add", ".gitattributes")
    repo.git("commit", "-q", "-m", "attributes")
    started: list[str] = []
    inside = threading.local()
    real_start, real_sync = threading.Thread.start, Checkouts.sync_checkouts

    def start(thread: threading.Thread) -> None:
        if getattr(inside, "sync", False):
            started.append(thread.name)
        real_start(thread)

    def sync(self: Checkouts, *args: object, **kwargs: object) -> object:
        inside.sync = True
        try:
            return real_sync(self, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            inside.sync = False

    monkeypatch.setattr(threading.Thread, "start", start)
    monkeypatch.setattr(Checkouts, "sync_checkouts", sync)
    executor = Executor(repo.path)
    patch = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n"
        "*** Add File: data.bin\n+raw\n*** Add File: notes.txt\n+a\n+b\n*** End Patch\n"
    )
    outcome = executor.call(patch)
    executor.close()
    assert outcome.receipt.status == "committed"
    assert outcome.sync_reports and outcome.sync_reports[0].written
    assert started == []
    assert (repo.path / "src/util.py").read_text() == "VALUE = 2\n"
    assert (repo.path / "notes.txt").read_bytes() == b"a\nb\n"
    assert repo.git("status", "--porcelain") == ""


def test_an_end_of_line_attribute_is_still_applied_on_the_way_to_the_work_tree(
    repo: Repo,
) -> None:
    (repo.path / ".gitattributes").write_text("*.txt text eol=crlf\n")
    repo.git("add", ".gitattributes")
    repo.git("commit", "-q", "-m", "attributes")
    executor = Executor(repo.path)
    receipt = executor.apply("*** Begin Patch\n*** Add File: notes.txt\n+a\n+b\n*** End Patch\n")
    executor.close()
    assert receipt.status == "committed"
    assert (repo.path / "notes.txt").read_bytes() == b"a\r\nb\r\n"
    assert repo.git("status", "--porcelain") == ""


def _long_history(repo: Repo, commits: int) -> list[str]:
    """``commits`` commits on main (loose objects, each its own tree), oldest first."""
    store = pygit2.Repository(str(repo.path))
    sig = pygit2.Signature("t", "t@t", 1_700_000_000, 0)
    parent = store.head.target if not store.head_is_unborn else None
    made = []
    for n in range(commits):
        blob = store.create_blob(f"history {n}\n".encode())
        builder = store.TreeBuilder(store[parent].tree) if parent else store.TreeBuilder()
        builder.insert("history.txt", blob, pygit2.enums.FileMode.BLOB)
        parent = store.create_commit(
            None, sig, sig, f"history {n}", builder.write(), [parent] if parent else []
        )
        made.append(str(parent))
    store.references.create("refs/heads/main", parent, force=True)
    if not store.is_bare:
        repo.git("reset", "-q", "--hard")
    return made


def _unreadable(repo: Repo, commits: list[str]) -> None:
    objects = Path(pygit2.Repository(str(repo.path)).path) / "objects"
    for commit in commits:
        (objects / commit[:2] / commit[2:]).unlink()


@pytest.mark.parametrize("bare", [False, True])
def test_the_sync_reads_no_commit_below_the_calls_base(tmp_path: Path, bare: bool) -> None:
    repo = make_repo(tmp_path / "repo", None if bare else FILES, bare=bare)
    made = _long_history(repo, 200)
    executor = Executor(repo.path)
    first = executor.apply("*** Begin Patch\n*** Add File: one.txt\n+1\n*** End Patch\n")
    assert first.status == "committed"
    # Whatever reads history below the tip from here on fails: the sync must not.
    _unreadable(repo, made[:190])
    receipt = executor.apply("*** Begin Patch\n*** Add File: two.txt\n+2\n*** End Patch\n")
    executor.close()
    assert receipt.status == "committed"
    if not bare:
        assert (repo.path / "two.txt").read_text() == "2\n"
        assert repo.git("status", "--porcelain") == ""


def test_without_a_checkout_a_call_leaves_nothing_unsynced_and_asks_for_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo", bare=True)
    _long_history(repo, 1)
    asked: list[str | None] = []
    real = SqliteLedger.unsynced

    def unsynced(self: SqliteLedger, ref: str | None = None) -> object:
        asked.append(ref)
        return real(self, ref)

    monkeypatch.setattr(SqliteLedger, "unsynced", unsynced)
    executor = Executor(repo.path)
    for n in range(3):
        patch = f"*** Begin Patch\n*** Add File: f{n}.txt\n+{n}\n*** End Patch\n"
        assert executor.apply(patch, branch="main").status == "committed"
    assert asked == []
    assert real(executor.context.ledger, None) == []  # type: ignore[arg-type]
    executor.close()


def test_the_unsynced_calls_of_a_branch_come_from_an_index(tmp_path: Path) -> None:
    ledger = SqliteLedger(tmp_path / "ledger.sqlite3")
    plan = ledger.db.execute(
        "EXPLAIN QUERY PLAN SELECT * FROM calls WHERE state = 'committed' AND synced = 0"
        " AND ref = ? ORDER BY updated_at, rowid",
        ("refs/heads/main",),
    ).fetchall()
    ledger.close()
    assert any("USING INDEX calls_unsynced" in str(step) for step in plan), plan


def test_a_checkout_index_changed_by_git_between_calls_is_read_again(repo: Repo) -> None:
    """In-process: the index kept in memory is not used once git has replaced the file."""
    executor = Executor(repo.path)
    assert executor.apply(_patch_util(1, 2)).status == "committed"
    (repo.path / "user.txt").write_text("mine\n")
    repo.git("add", "user.txt")
    assert executor.apply(_patch_util(2, 3)).status == "committed"
    executor.close()
    assert repo.git("status", "--porcelain").strip() == "A  user.txt"
    assert (repo.path / "src/util.py").read_text() == "VALUE = 3\n"
    assert not [p for p in os.listdir(repo.path / ".git") if p.startswith(".applyonce-tmp-")]


def _patch_util(old: int, new: int) -> str:
    return (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n"
        f"-VALUE = {old}\n+VALUE = {new}\n*** End Patch\n"
    )
