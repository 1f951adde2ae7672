"""``--remote`` fetches into applyonce's own refs only: the user's ``FETCH_HEAD``, ``ORIG_HEAD``,
remote-tracking refs and tags are as they were, whatever the server has meanwhile. A call moves
only what it is meant to: the branch it lands on (and, as ``git push`` does for every push,
``refs/remotes/<remote>/<branch>`` to the commit it pushed)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import UTIL_PATCH, Repo, Served, run_cli
from tests.e2e.support import apply_remote


def _user_state(clone: Repo) -> tuple[bytes, bytes, dict[str, str]]:
    git_dir = clone.path / ".git"
    refs = {}
    listed = clone.git("for-each-ref", "--format=%(refname) %(objectname) %(symref)")
    for line in listed.splitlines():
        name, oid, *symref = line.split()
        if not name.startswith("refs/applyonce/"):
            refs[name] = symref[0] if symref else oid  # a symbolic ref: what it names
    return (git_dir / "FETCH_HEAD").read_bytes(), (git_dir / "ORIG_HEAD").read_bytes(), refs


def _server_moves_on(served: Served, tmp_path: Path) -> None:
    """Another clone pushes a commit on main, a new branch and a tag: a plain 'git fetch'
    would now change FETCH_HEAD, refs/remotes/origin/* and the tags."""
    other = served.another_clone(tmp_path / "other")
    (other.path / "README.md").write_text("# demo, again\n")
    other.git("commit", "-q", "-am", "theirs")
    other.git("tag", "v9")
    other.git("push", "-q", "origin", "main", "main:refs/heads/topic", "v9")


def test_remote_commands_leave_the_users_fetch_head_and_refs_alone(
    served: Served, tmp_path: Path
) -> None:
    clone = served.clone
    clone.git("fetch", "-q", "origin")  # the user's own FETCH_HEAD
    clone.git("update-ref", "ORIG_HEAD", clone.head())
    _server_moves_on(served, tmp_path)
    before = _user_state(clone)
    for command in ("recover", "audit", "log"):
        done = run_cli(command, "--repo", str(clone.path), "--remote", "origin")
        assert done.returncode == 0, command + done.stdout + done.stderr
        assert _user_state(clone) == before, command
    # A call: the branch it lands on moves, and refs/remotes/origin/main as git push moves it;
    # FETCH_HEAD, ORIG_HEAD, the tags and the other remote-tracking refs do not.
    done = apply_remote(clone, UTIL_PATCH, "--json")
    assert done.returncode == 0, done.stderr
    commit = json.loads(done.stdout)["commit"]
    fetch_head, orig_head, refs = _user_state(clone)
    assert (fetch_head, orig_head) == before[:2]
    expected = dict(before[2])
    expected["refs/heads/main"] = commit
    expected["refs/remotes/origin/main"] = commit
    assert refs == expected
    assert "refs/tags/v9" not in refs and "refs/remotes/origin/topic" not in refs
