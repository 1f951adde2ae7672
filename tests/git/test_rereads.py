"""Reads of objects outlast git replacing the packs under them (applyonce.git.rereads).

libgit2 keeps the multi-pack-index and the pack indexes it read: once ``git repack -a -d`` and
``git multi-pack-index write`` (what ``git maintenance``'s incremental-repack does) replace a pack
whose index libgit2 had read but whose ``.pack`` it had not opened, every read of an object of
that pack failed with "invalid packfile", in that call and in every later call of the same
repository object. Real git processes between the reads throughout; nothing is faked.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson

from applyonce import Executor
from applyonce.core.plan import plan
from applyonce.git.store import GitStore
from applyonce.patch import parse
from tests.conftest import Repo, make_repo, run_cli, write_files


def _patch(name: str) -> str:
    return f"*** Begin Patch\n*** Add File: {name}.txt\n+{name}\n*** End Patch\n"


def _commit(repo: Repo, name: str) -> None:
    write_files(repo.path, {f"{name}.txt": f"{name}\n"})
    repo.git("add", f"{name}.txt")
    repo.git("commit", "-q", "-m", name)


def _pack_names(repo: Repo) -> set[str]:
    return {p.name for p in (repo.path / ".git" / "objects" / "pack").glob("*.pack")}


def test_calls_of_one_executor_read_side_work_git_repacked_between_them(tmp_path: Path) -> None:
    # A harness keeps one executor (as the MCP server does). Between its calls the user commits
    # on a side branch, and their housekeeping packs it, writes a multi-pack-index, then
    # replaces the packs; then they merge the side branch. The next call walks the new commits
    # (is this call on the branch already?) and reads the side commit through the index it had
    # read: before, "invalid packfile" in this call and in every later one.
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    repo.git("repack", "-a", "-d", "-q")
    executor = Executor(repo.path)
    try:
        assert executor.apply(_patch("first")).status == "committed"
        repo.git("switch", "-q", "-c", "side")
        _commit(repo, "side")
        repo.git("switch", "-q", "main")
        repo.git("repack", "-d", "-q")  # the side commit in a pack of its own
        side_pack = _pack_names(repo)
        assert executor.apply(_patch("second")).status == "committed"
        repo.git("multi-pack-index", "write")
        assert executor.apply(_patch("third")).status == "committed"
        repo.git("repack", "-a", "-d", "-q")
        repo.git("multi-pack-index", "write")
        assert not side_pack & _pack_names(repo)  # the packs it read are gone
        repo.git("merge", "-q", "--no-edit", "side")
        for name in ("fourth", "fifth"):
            receipt = executor.apply(_patch(name))
            assert receipt.status == "committed", receipt
            assert repo.head() == receipt.commit
    finally:
        executor.close()
    assert repo.git("show", "HEAD:side.txt") == "side\n"
    assert repo.git("fsck", "--strict", "--no-dangling") == ""


def test_a_store_reads_objects_whose_pack_git_replaced_after_it_read_its_index(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    repo.git("repack", "-a", "-d", "-q")
    base = repo.head()
    store = GitStore(repo.path)
    assert store.tree_at(base).read("a.txt")[0] == b"a\n"
    _commit(repo, "b")
    repo.git("repack", "-d", "-q")
    assert not store.has_object("1" * 40)  # a miss: libgit2 lists the new pack, reads its index
    repo.git("multi-pack-index", "write")
    assert not store.has_object("2" * 40)  # another: it reads the multi-pack-index
    repo.git("repack", "-a", "-d", "-q")
    repo.git("multi-pack-index", "write")
    head = repo.head()
    assert store.tree_at(head).read("b.txt")[0] == b"b\n"
    assert list(store.walk(head)) == [head, base]
    assert store.parent_of(head) == base
    assert store.is_ancestor(base, head)
    assert store.trailers_of(head).all("Call-Id") == []


def test_a_commit_read_whose_tree_is_in_a_pack_git_expired_is_read_again(tmp_path: Path) -> None:
    # The commit is loose, its tree in a pack a multi-pack-index named: 'git multi-pack-index
    # expire' deleted that pack once a newer one held its objects. libgit2 put its own words over
    # the read's ("can not be successfully peeled into a tree"): not taken for a replaced pack,
    # the read failed, in this call and every later one.
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    repo.git("repack", "-a", "-d", "-q")
    base = repo.head()
    store = GitStore(repo.path)
    assert store.tree_at(base).read("a.txt")[0] == b"a\n"
    _commit(repo, "b")
    head = repo.head()
    tree, blob = repo.git("rev-parse", "HEAD^{tree}", "HEAD:b.txt").split()
    subprocess.run(
        ["git", "-C", str(repo.path), "pack-objects", "-q", ".git/objects/pack/pack"],
        input=f"{tree}\n{blob}\n".encode(),
        capture_output=True,
        check=True,
    )
    assert not store.has_object("1" * 40)  # a miss: libgit2 lists the new pack, reads its index
    repo.git("multi-pack-index", "write")
    assert not store.has_object("2" * 40)  # another: it reads the multi-pack-index
    tree_pack = _pack_names(repo)
    repo.git("repack", "-a", "-q")  # a pack of everything: the others stay, until...
    repo.git("multi-pack-index", "write")
    repo.git("multi-pack-index", "expire")  # ...they are expired
    assert not tree_pack & _pack_names(repo)
    assert (repo.path / ".git" / "objects" / head[:2] / head[2:]).is_file()  # still loose
    for _ in range(2):
        assert store.paths_changed(base, head) == {"b.txt"}
        assert [c.path for c in store.changes_in(base, head)] == ["b.txt"]


def test_a_pack_that_stays_unreadable_is_a_retryable_refusal_not_a_traceback(repo: Repo) -> None:
    # Not a race: a pack that a multi-pack-index names, damaged on disk, reads as the race does
    # ("invalid packfile"), and stays so however often it is read afresh.
    repo.git("repack", "-a", "-d", "-q", "--write-midx")
    [pack] = (repo.path / ".git" / "objects" / "pack").glob("*.pack")
    data = bytearray(pack.read_bytes())
    data[-1] ^= 0xFF  # its trailer no longer matches its index
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    head, files = repo.head(), repo.files()
    result = run_cli("apply", "-", "--repo", str(repo.path), input=_patch("new"))
    assert result.returncode == 4, result
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: cannot read objects of the repository (")
    assert "invalid packfile" in line and "nothing was published; repeat the call" in line
    assert repo.git("rev-parse", "HEAD").strip() == head
    assert repo.files() == files
    assert not list((repo.state_dir() / "receipts").glob("*.json"))


def test_an_object_libgit2_cannot_read_is_never_taken_for_a_bad_file_name(repo: Repo) -> None:
    # libgit2 skips writing an object it finds in a pack (it "freshens" it instead), then checks
    # that each tree entry's object can be read. Where that pack is gone (a stale
    # multi-pack-index names it) or damaged, the check fails: the call was rejected for good as
    # an unsafe path ("'x.txt' is not a valid file name"). It is a retryable refusal.
    blob = subprocess.run(
        ["git", "-C", str(repo.path), "hash-object", "-w", "--stdin"],
        input=b"x\n",
        capture_output=True,
        check=True,
    ).stdout.decode()
    repo.git("repack", "-a", "-d", "-q")
    before = _pack_names(repo)
    subprocess.run(
        ["git", "-C", str(repo.path), "pack-objects", "-q", ".git/objects/pack/pack"],
        input=blob.encode(),
        capture_output=True,
        check=True,
    )
    repo.git("multi-pack-index", "write")
    [name] = _pack_names(repo) - before  # the blob alone, in a pack the index names
    pack = repo.path / ".git" / "objects" / "pack" / name
    data = bytearray(pack.read_bytes())
    data[-1] ^= 0xFF
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    head, files = repo.head(), repo.files()
    patch = "*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n"
    result = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=patch)
    assert result.returncode == 4, result
    error = orjson.loads(result.stdout)["error"]
    assert error["kind"] == "objects-unreadable" and error["retryable"] is True, error
    assert "invalid object specified - x.txt" in error["message"]
    assert repo.head() == head
    assert repo.files() == files


def test_a_store_drops_its_view_of_the_objects_while_a_walk_holds_the_old_one(
    tmp_path: Path,
) -> None:
    # libgit2 gives an object database backend to one object database for good: the staging's
    # in-memory backend, put back in front of the new database after a drop, made libgit2
    # refuse ("unrecoverable internal error") whenever the old database lived on — held by a
    # walk of the history in progress, which a drop in the middle of a read meets.
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    store = GitStore(repo.path)
    base = store.tree_at(repo.head())
    tree, blobs = store.write_tree(base, plan(parse(_patch("staged")), base))
    for _ in range(3):
        walk = store.repo.walk(repo.head())  # holds the object database it was made with
        store.reread_objects()
        assert [str(commit.id) for commit in walk] == [repo.head()]
        assert store.repo[blobs["staged.txt"]].data == b"staged\n"  # still in memory
        assert store.tree_at(repo.head()).read("a.txt")[0] == b"a\n"
    assert str(store.repo[tree].id) == tree
    assert not (repo.path / ".git" / "objects" / blobs["staged.txt"][:2]).exists()
