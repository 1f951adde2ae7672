""":mod:`applyonce.git.serverhook` in-process: what the hook reads from git (its stdin, the push
options in its environment), and the branch index after a rewrite of the branch."""

from __future__ import annotations

from pathlib import Path

from applyonce.git.serverhook import (
    INDEX_DIR,
    ZERO,
    BareRepo,
    BranchIndex,
    Update,
    check_push,
    parse_updates,
    push_option_call_ids,
)
from tests.conftest import git, make_repo

CALL = "a" * 64


def test_the_updates_are_read_as_git_gives_them() -> None:
    lines = [f"{'1' * 40} {'2' * 40} refs/heads/main", "", "garbage", f"{ZERO} {'3' * 40} refs/x"]
    assert parse_updates(lines) == [
        Update("1" * 40, "2" * 40, "refs/heads/main"),
        Update(ZERO, "3" * 40, "refs/x"),
    ]


def test_only_call_id_push_options_name_calls() -> None:
    env = {
        "GIT_PUSH_OPTION_COUNT": "4",
        "GIT_PUSH_OPTION_0": f"call-id={CALL}",
        "GIT_PUSH_OPTION_1": "ci.skip",
        "GIT_PUSH_OPTION_2": "call-id=not a call id; rm -rf /",
        "GIT_PUSH_OPTION_3": "call-id=b1",
    }
    assert push_option_call_ids(env) == [CALL, "b1"]
    assert push_option_call_ids({"GIT_PUSH_OPTION_COUNT": "x"}) == []
    assert push_option_call_ids({}) == []


def commit(repo: Path, name: str, call: str | None = None) -> str:
    message = f"{name}\n\nCall-Id: {call}\n" if call else name
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD").strip()


def test_the_index_follows_a_rewritten_branch(tmp_path: Path) -> None:
    work = make_repo(tmp_path / "work", {"a.txt": "a\n"})
    base = work.head()
    first = commit(work.path, "first", CALL)
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(work.path), str(bare))
    store = BareRepo(bare)
    index = BranchIndex(bare, "refs/heads/main")
    assert index.held_at(store, first) == {CALL: first}
    # The branch rewritten without the call: the index, built at a tip that is no longer an
    # ancestor, is rebuilt, not extended.
    git(work.path, "reset", "-q", "--hard", base)
    other = commit(work.path, "other")
    git(work.path, "push", "-q", "--force", str(bare), "main")
    assert BranchIndex(bare, "refs/heads/main").held_at(BareRepo(bare), other) == {}
    again = commit(work.path, "again", CALL)
    git(work.path, "push", "-q", str(bare), f"{again}:refs/heads/incoming")
    assert check_push(bare, [Update(other, again, "refs/heads/main")]) == []
    assert len(list((bare / INDEX_DIR).iterdir())) == 1
