"""The checkout sync holds index.lock from its read of the index to its write: real git processes
adding and committing other files meanwhile lose nothing, and none of them fails silently."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import orjson

from tests.conftest import apply, make_repo

FILES = 250

# A user's shell loop: add a new file, sometimes commit it; a git that finds index.lock taken
# fails loudly (exit 128, "index.lock': File exists"; a commit that lost the race for the branch:
# "cannot lock ref") and the loop runs it again, as a person would.
USER_LOOP = r"""
import json, pathlib, subprocess, sys, time
root, stop, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
added, committed, loud, silent = [], [], 0, []
def git(*args):
    global loud
    while True:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
        if done.returncode == 0:
            return
        if "index.lock" in done.stderr or "cannot lock ref" in done.stderr:
            loud += 1
            time.sleep(0.005)
            continue
        silent.append([args, done.returncode, done.stderr])
        return
i, last = 0, time.monotonic()
while not stop.exists():
    name = f"user/u{i}.txt"
    (root / "user").mkdir(exist_ok=True)
    (root / name).write_text(f"user {i}\n")
    git("add", name)
    added.append(name)
    if time.monotonic() - last > 0.5:  # a commit now and then: the branch moves too
        last = time.monotonic()
        git("commit", "-q", "-m", f"user {i}", "--", name)
        committed.append(name)
    i += 1
out.write_text(json.dumps({"added": added, "committed": committed, "loud": loud,
                           "silent": silent}))
"""


def test_concurrent_git_add_and_commit_survive_the_sync_of_a_large_patch(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"README.md": "hi\n"})
    patch = (
        "*** Begin Patch\n"
        + "".join(f"*** Add File: big/f{i}.txt\n+line {i}\n" for i in range(FILES))
        + "*** End Patch\n"
    )
    stop, out = tmp_path / "stop", tmp_path / "loop.json"
    loop = subprocess.Popen([sys.executable, "-c", USER_LOOP, str(repo.path), str(stop), str(out)])
    try:
        time.sleep(0.3)
        result = apply(repo, patch, "--json")
        time.sleep(0.3)
    finally:
        stop.touch()
        loop.wait(timeout=60)
    assert result.returncode == 0, result.stdout[-2000:]
    assert orjson.loads(result.stdout)["status"] == "committed"
    user = orjson.loads(out.read_text())
    assert user["silent"] == [], user["silent"]
    assert len(user["added"]) > 5 and user["committed"]
    staged = set(repo.git("ls-files").split())
    assert set(user["added"]) <= staged  # every git add is still in the index
    assert set(user["committed"]) <= set(repo.git("ls-tree", "-r", "--name-only", "HEAD").split())
    assert {f"big/f{i}.txt" for i in range(FILES)} <= staged
    assert repo.git("diff", "--name-only") == ""  # the work tree matches the index everywhere
    cached = repo.git("diff", "--cached", "--name-only").split()
    assert all(path.startswith("user/") for path in cached)
    assert (repo.path / "big/f7.txt").read_text() == "line 7\n"
