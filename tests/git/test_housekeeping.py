"""The user's git housekeeping beside calls: ``git repack -a -d``, ``git gc --prune=now`` and
``git maintenance`` never delete the objects of a call, before or after its publish.

``git repack -a -d`` lists the packs there are, reads the refs, writes one pack of what they reach,
then deletes every pack it listed. A call's pack written before that listing, whose commit the
branch reaches only after those refs were read, was deleted whole: the call said Success and the
branch named missing objects. A call's packs are now kept (a ``.keep`` beside them) until the
branch reaches them, as ``git receive-pack`` keeps a pushed pack. Real git processes throughout.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import APP_PATCH, Repo, apply, make_repo, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

PATCH = """*** Begin Patch
*** Update File: d0/f0.txt
@@
-line 0 of 0
+line 0 of 0, changed
*** Add File: notes/new.txt
+a new file
*** End Patch
"""


def _big_repo(root: Path) -> Repo:
    """A repository whose full repack with fresh deltas takes seconds (3 MB of text)."""
    rnd = random.Random(1)
    files = {
        f"d{i % 10}/f{i}.txt": f"line 0 of {i}\n"
        + "".join(f"{rnd.random()} line {j}\n" for j in range(1, 2000))
        for i in range(80)
    }
    repo = make_repo(root, files)
    repo.git("gc", "-q")
    return repo


def _keeps(repo: Repo) -> list[Path]:
    return sorted((repo.path / ".git" / "objects" / "pack").glob("*.keep"))


def _assert_sound(repo: Repo, commits: list[str]) -> None:
    """git fsck finds nothing, every commit and everything it reaches is there."""
    fsck = subprocess.run(
        ["git", "-C", str(repo.path), "fsck", "--strict", "--full", "--no-dangling"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert fsck.returncode == 0 and fsck.stdout + fsck.stderr == "", fsck
    for commit in commits:
        repo.git("cat-file", "-e", commit)
        listed = repo.git("rev-list", "--objects", "--missing=print", commit)
        assert not [line for line in listed.splitlines() if line.startswith("?")], commit


def _housekeeping_during_check(tmp_path: Path, repo: Repo, command: str) -> tuple[str, Path]:
    """A ``--check`` that starts ``command`` (a git housekeeping run, in the background) and
    returns once it has listed the packs and read the refs (it is preparing its pack, which
    takes seconds): the call's staged objects are in a pack by then, its commit not yet made.
    Returns the check and the file that appears when the housekeeping is done."""
    trace, done = tmp_path / "trace2.json", tmp_path / "housekeeping.done"
    script = tmp_path / "housekeeping.sh"
    script.write_text(
        f"""#!/bin/sh
cd '{repo.path}'
( GIT_TRACE2_EVENT='{trace}' {command} >/dev/null 2>&1; touch '{done}' ) </dev/null >/dev/null 2>&1 &
i=0
until grep -q '"prepare-pack"' '{trace}' 2>/dev/null; do
    sleep 0.02; i=$((i + 1)); [ $i -gt 3000 ] && exit 1
done
exit 0
"""
    )
    return f"sh {script}", done


def _wait_for(done: Path, timeout: float = 180.0) -> float:
    deadline = time.monotonic() + timeout
    while not done.exists():
        assert time.monotonic() < deadline, "the housekeeping did not finish"
        time.sleep(0.05)
    return done.stat().st_mtime


@pytest.mark.parametrize(
    "command",
    [
        "git -c pack.threads=1 repack -a -d -f -q --window=50",
        "git -c pack.threads=1 -c gc.aggressiveWindow=50 gc --aggressive --prune=now -q",
    ],
    ids=["repack-a-d", "gc-prune-now"],
)
def test_a_repack_that_read_the_refs_before_the_publish_deletes_nothing_of_the_call(
    tmp_path: Path, command: str
) -> None:
    repo = _big_repo(tmp_path / "repo")
    check, done = _housekeeping_during_check(tmp_path, repo, command)
    result = apply(repo, PATCH, "--check", check, "--json")
    returned = time.time()
    assert result.returncode == 0, result
    commit = orjson.loads(result.stdout)["commit"]
    finished = _wait_for(done)
    # The race took place: the housekeeping deleted the packs it had listed after the publish.
    assert finished > returned, "the housekeeping ended before the call did: nothing was tested"
    assert repo.head() == commit
    _assert_sound(repo, [commit])
    assert repo.git("show", "HEAD:notes/new.txt") == "a new file\n"
    assert _keeps(repo) == []
    # And the repository stays usable: the next call lands.
    again = apply(repo, "*** Begin Patch\n*** Add File: after.txt\n+after\n*** End Patch\n")
    assert again.returncode == 0, again


_CALLS = """
import sys
from applyonce import Executor
from applyonce.errors import ApplyOnceError
repo, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
executor = Executor(repo)
for i in range(count):
    patch = f"*** Begin Patch\\n*** Add File: w{worker}/f{i}.txt\\n+line {i}\\n*** End Patch\\n"
    try:
        receipt = executor.apply(patch)
        if receipt.status == "committed":
            print("committed", receipt.commit, flush=True)
        else:
            error = receipt.error or {}
            print("rejected", error.get("retryable"), error.get("message"), flush=True)
    except ApplyOnceError as exc:  # a refusal the CLI says in one line (exit 4, 5)
        print("refused", exc.retryable, exc.one_line(), flush=True)
    except Exception as exc:  # what the CLI would show as a traceback (exit 3)
        print("error", type(exc).__name__, str(exc).replace("\\n", " ")[:300], flush=True)
executor.close()
"""

# Of the 36 calls, how many may be refused as ones to repeat (none was, in hundreds of runs):
# a call that lost every restage to the other writers, say.
_RETRYABLE_REFUSALS = 2


@pytest.mark.parametrize(
    "housekeeping",
    [
        "repack -a -d -q",
        "gc --prune=now -q",
        "maintenance run --task=gc --task=loose-objects --task=incremental-repack --quiet",
        "repack -a -d -q --write-midx",
    ],
    ids=["repack", "gc", "maintenance", "repack-midx"],
)
def test_calls_beside_a_loop_of_housekeeping_all_keep_their_objects(
    tmp_path: Path, housekeeping: str
) -> None:
    # Before, a call lost reads to git: libgit2 read a pack a multi-pack-index it had read named,
    # or whose index it had read, after git deleted it ("invalid packfile"), and failed the call
    # and every later call of the same executor (exit 3, nothing published). Every call lands.
    repo = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    loop = subprocess.Popen(
        ["sh", "-c", f"while :; do git -C '{repo.path}' {housekeeping} >/dev/null 2>&1; done"],
        start_new_session=True,
    )
    try:
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", _CALLS, str(repo.path), str(w), "12"],
                stdout=subprocess.PIPE,
                text=True,
                env=os.environ.copy(),
            )
            for w in range(3)
        ]
        lines = [line for proc in workers for line in proc.communicate(timeout=300)[0].splitlines()]
    finally:
        os.killpg(loop.pid, 9)
        loop.wait()
    assert len(lines) == 36, lines
    committed = [line.split()[1] for line in lines if line.startswith("committed ")]
    failed = [line for line in lines if not line.startswith("committed ")]
    assert [line for line in failed if not line.startswith(("rejected True", "refused True"))] == []
    assert len(failed) <= _RETRYABLE_REFUSALS, failed
    on_branch = set(repo.git("rev-list", "HEAD").split())
    assert set(committed) <= on_branch
    _assert_sound(repo, committed)
    assert _keeps(repo) == []


def test_a_killed_calls_pack_stays_kept_until_recover_has_settled_it(repo: Repo) -> None:
    base = repo.head()
    killed = apply(
        repo,
        "*** Begin Patch\n*** Add File: new.txt\n+new\n*** End Patch\n",
        env={"APPLYONCE_FAULT": "after-commit-object"},
    )
    assert killed.returncode == -9
    assert len(_keeps(repo)) == 1  # made by the killed call, still there
    # The user's housekeeping meanwhile: the unpublished commit's pack is not deleted.
    repo.git("repack", "-a", "-d", "-q")
    repo.git("gc", "-q", "--prune=now")
    recovered = run_cli("recover", "--repo", str(repo.path), "--json")
    assert recovered.returncode == 0, recovered
    [outcome] = orjson.loads(recovered.stdout)["outcomes"]
    assert outcome["now"] == "committed"  # rolled forward: its objects were all there
    assert repo.git("rev-parse", "HEAD~1").strip() == base
    assert _keeps(repo) == []
    assert any(path.endswith(".keep") for path in orjson.loads(recovered.stdout)["removed"])
    _assert_sound(repo, [repo.head()])


@pytest.mark.parametrize(
    "point",
    ["after-stage", "after-commit-object", "during-publish", "after-publish", "after-receipt"],
)
def test_recover_leaves_no_keep_after_a_crash(repo: Repo, point: str) -> None:
    killed = apply(
        repo,
        "*** Begin Patch\n*** Add File: new.txt\n+new\n*** End Patch\n",
        "--check",
        "true",
        env={"APPLYONCE_FAULT": point},
    )
    assert killed.returncode == -9
    recovered = run_cli("recover", "--repo", str(repo.path), "--json")
    assert recovered.returncode == 0, recovered
    assert _keeps(repo) == []
    assert list((repo.state_dir() / "locks").glob("*.json")) == []
    _assert_sound(repo, [repo.head()])


def test_recover_leaves_a_keep_it_did_not_make(repo: Repo) -> None:
    # git's own (index-pack --keep, a fetch in progress) and the user's keeps are not ours.
    pack = next((repo.path / ".git" / "objects" / "pack").glob("*.pack"), None)
    if pack is None:
        repo.git("repack", "-a", "-d", "-q")
        pack = next((repo.path / ".git" / "objects" / "pack").glob("*.pack"))
    keep = pack.with_suffix(".keep")
    keep.write_text("fetch-pack 1234 on host\n")
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered
    assert keep.read_text() == "fetch-pack 1234 on host\n"


def test_recover_removes_a_dead_writers_temp_pack_files_and_no_others(repo: Repo) -> None:
    # A call killed while writing its pack leaves its temp files (not git's tmp_* names, which
    # 'git prune --expire=now' deletes under a live writer's feet); recover removes a dead
    # writer's only.
    dead = subprocess.Popen(["true"])
    dead.wait()
    pack_dir = repo.path / ".git" / "objects" / "pack"
    pack_dir.mkdir(parents=True, exist_ok=True)
    left = [pack_dir / f".applyonce-tmp-{kind}.{dead.pid}.0badc0de" for kind in ("pack", "idx")]
    live = pack_dir / f".applyonce-tmp-pack.{os.getpid()}.0badc0de"
    gits = pack_dir / "tmp_pack_XXXXXX"
    for path in (*left, live, gits):
        path.write_bytes(b"partial")
    recovered = run_cli("recover", "--repo", str(repo.path), "--json")
    assert recovered.returncode == 0, recovered
    assert sorted(orjson.loads(recovered.stdout)["removed"]) == sorted(str(p) for p in left)
    assert live.exists() and gits.exists()


def _loose_objects(repo: Repo) -> list[str]:
    objects = repo.path / ".git" / "objects"
    return sorted(
        f"{folder.name}{path.name}"
        for folder in objects.iterdir()
        if re.fullmatch(r"[0-9a-f]{2}", folder.name)
        for path in folder.iterdir()
    )


def test_a_dirty_commit_writes_its_snapshot_into_the_calls_kept_pack_never_loose(
    repo: Repo,
) -> None:
    # libgit2 wrote the snapshot's blob as a loose object: 'git prune-packed' (gc, repack -a
    # -d, maintenance's loose-objects) removed the empty objects/xx folder between its mkdir and
    # its rename ("failed to rename lockfile", a traceback), and 'git prune --expire=now' could
    # delete the unreachable blob before the publish. It is written as the staging's objects
    # are: into memory, then into the call's kept pack.
    repo.git("repack", "-a", "-d", "-q")
    assert _loose_objects(repo) == []
    mine = "def greet(name):\n    return 'hello ' + name\n\n# my edit, not committed\n"
    (repo.path / "src" / "app.py").write_text(mine)
    result = apply(repo, APP_PATCH, "--dirty", "commit")
    assert result.returncode == 0, result
    assert _loose_objects(repo) == []
    assert repo.git("show", "HEAD~1:src/app.py") == mine
    _assert_sound(repo, [repo.head()])
    assert _keeps(repo) == []


def test_dirty_commits_beside_a_loop_of_prune_packed_all_land(tmp_path: Path) -> None:
    # The race itself, with real processes: 'git prune-packed' removes every empty objects/xx
    # folder, over and over. The snapshot's loose write failed about one call in three
    # ("failed to rename lockfile to .../objects/xx/...", exit 3).
    calls = 10
    repo = make_repo(tmp_path / "repo", {f"f{i}.txt": f"line {i}\n" for i in range(calls)})
    loop = subprocess.Popen(
        ["sh", "-c", f"while :; do git -C '{repo.path}' prune-packed >/dev/null 2>&1; done"],
        start_new_session=True,
    )
    try:
        for i in range(calls):
            mine = f"line {i}\nmine {i}\n"
            (repo.path / f"f{i}.txt").write_text(mine)
            patch = f"*** Begin Patch\n*** Update File: f{i}.txt\n@@\n line {i}\n+patched {i}\n*** End Patch\n"
            result = apply(repo, patch, "--dirty", "commit")
            assert result.returncode == 0, result
            assert repo.git("show", f"HEAD~1:f{i}.txt") == mine
    finally:
        os.killpg(loop.pid, 9)
        loop.wait()
    assert repo.commit_count() == 1 + 2 * calls
    _assert_sound(repo, [repo.head()])
    assert _keeps(repo) == []
