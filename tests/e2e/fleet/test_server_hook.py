"""``applyonce hook pre-receive``: exactly once at the commit point (issue 28, deliverable 2).

Every push here is a real ``git push`` through the smart-HTTP server (nginx, fcgiwrap, ``git
http-backend``; tests/httpserver.py) into a bare repository where ``applyonce hook install`` put
the hook: a push that would put a ``Call-Id`` on a branch that already holds it is refused, one
line per refused ref naming the call and the commit holding it, whoever pushes (plain git, a
clone without the shared ledger, a shallow clone, applyonce's own publisher).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from applyonce import Executor
from applyonce.git.history import CallIdIndex, MemoryHistoryCache
from applyonce.git.publisher import CallOnBranchError
from applyonce.git.remote import RemotePublisher
from applyonce.git.store import GitStore
from tests.conftest import UTIL_PATCH, Repo, Served, git, run_cli, serve_on
from tests.e2e.support import apply_remote, server_calls

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

MAIN = "refs/heads/main"
CALL = "c" * 64
OTHER = "d" * 64


@pytest.fixture
def guarded(git_http: Any, tmp_path: Path) -> Served:
    """A repository on the smart-HTTP server with the hook installed, and a clone of it."""
    served = serve_on(git_http, tmp_path)
    done = run_cli("hook", "install", "--bare", str(served.server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"installed {served.server / 'hooks' / 'pre-receive'}\n"
    return served


def commit(clone: Repo, name: str, *calls: str) -> str:
    """A commit on the clone's branch (nothing changed but the message), with a Call-Id trailer
    for each of ``calls``."""
    message = name + ("\n\n" + "".join(f"Call-Id: {c}\n" for c in calls) if calls else "")
    clone.git("commit", "-q", "--allow-empty", "-m", message)
    return clone.head()


def push(clone: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(clone.path), "push", "--porcelain", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def refusal(ref: str, call: str, holder: str) -> str:
    return f"applyonce: {ref}: call {call} is already on this branch in commit {holder}"


def remote_lines(stderr: str) -> list[str]:
    return [
        line.removeprefix("remote:").strip()
        for line in stderr.splitlines()
        if line.startswith("remote:") and line.removeprefix("remote:").strip()
    ]


def test_a_call_pushed_twice_onto_a_branch_is_refused(guarded: Served, tmp_path: Path) -> None:
    first = commit(guarded.clone, "first", CALL)
    assert push(guarded.clone, "origin", "main").returncode == 0
    # Another clone, without the first one's commit in view, lands the same call again.
    other = guarded.another_clone(tmp_path / "other")
    other.git("reset", "-q", "--hard", "HEAD~1")
    other.git("pull", "-q", "--rebase", "origin", "main")
    commit(other, "unrelated")
    commit(other, "again", CALL)
    done = push(other, "origin", "main")
    assert done.returncode != 0
    assert remote_lines(done.stderr) == [refusal(MAIN, CALL, first)]
    assert "pre-receive hook declined" in done.stdout
    assert guarded.server_git("rev-parse", "main").strip() == first
    # Another call goes through.
    other.git("reset", "-q", "--hard", "HEAD~1")
    commit(other, "another", OTHER)
    assert push(other, "origin", "main").returncode == 0


def test_one_line_per_refused_ref(guarded: Served) -> None:
    first = commit(guarded.clone, "first", CALL)
    assert push(guarded.clone, "origin", "main").returncode == 0
    commit(guarded.clone, "again", CALL)
    guarded.clone.git("branch", "topic")
    done = push(guarded.clone, "origin", "main", "topic")
    assert done.returncode != 0
    lines = remote_lines(done.stderr)
    assert lines == [
        refusal(MAIN, CALL, first),
        refusal("refs/heads/topic", CALL, first),
    ]
    assert guarded.server_git("branch", "--list", "topic") == ""


def test_a_call_twice_among_the_pushed_commits_is_refused(guarded: Served) -> None:
    """Neither commit is on the branch: the refusal says where the call is twice, never that it
    is on the branch already (which applyonce's client would take as its call landed)."""
    older = commit(guarded.clone, "one", CALL)
    newer = commit(guarded.clone, "two", CALL)
    before = guarded.server_git("rev-parse", "main").strip()
    done = push(guarded.clone, "origin", "main")
    twice = f"applyonce: {MAIN}: call {CALL} is twice among the pushed commits ({older}, {newer})"
    assert remote_lines(done.stderr) == [twice]
    assert guarded.server_git("rev-parse", "main").strip() == before
    # One commit naming the call twice: the same words, that commit twice.
    guarded.clone.git("reset", "-q", "--hard", before)
    both = commit(guarded.clone, "both", CALL, CALL)
    done = push(guarded.clone, "origin", "main")
    twice = f"applyonce: {MAIN}: call {CALL} is twice among the pushed commits ({both}, {both})"
    assert remote_lines(done.stderr) == [twice]
    assert guarded.server_git("rev-parse", "main").strip() == before


def test_push_options_name_a_call_whose_trailers_are_gone(guarded: Served) -> None:
    first = commit(guarded.clone, "first", CALL)
    assert push(guarded.clone, "origin", "main").returncode == 0
    commit(guarded.clone, "squashed: its trailers dropped")
    done = push(guarded.clone, "-o", f"call-id={CALL}", "origin", "main")
    assert remote_lines(done.stderr) == [refusal(MAIN, CALL, first)]
    done = push(guarded.clone, "-o", f"call-id={OTHER}", "origin", "main")
    assert done.returncode == 0, done.stderr


def test_a_rewritten_branch_is_judged_by_what_stays(guarded: Served) -> None:
    base = guarded.clone.head()
    commit(guarded.clone, "first", CALL)
    assert push(guarded.clone, "origin", "main").returncode == 0
    # A force push that takes the call's commit off the branch may land it again.
    guarded.clone.git("reset", "-q", "--hard", base)
    again = commit(guarded.clone, "again", CALL)
    done = push(guarded.clone, "--force", "origin", "main")
    assert done.returncode == 0, done.stderr
    assert guarded.server_git("rev-parse", "main").strip() == again


def test_the_index_is_rebuilt_when_damaged(guarded: Served) -> None:
    first = commit(guarded.clone, "first", CALL)
    assert push(guarded.clone, "origin", "main").returncode == 0
    for n in range(3):
        commit(guarded.clone, f"more {n}", f"{n}" * 64)
        assert push(guarded.clone, "origin", "main").returncode == 0
    index = list((guarded.server / "applyonce" / "call-ids").iterdir())
    assert len(index) == 1
    held = json.loads(index[0].read_bytes())
    assert held["tip"] != first and held["ids"][CALL] == first
    index[0].write_text("{not json")
    commit(guarded.clone, "again", CALL)
    done = push(guarded.clone, "origin", "main")
    assert remote_lines(done.stderr) == [refusal(MAIN, CALL, first)]
    assert json.loads(index[0].read_bytes())["ids"][CALL] == first


def test_install_refuses_what_is_not_a_bare_repository_or_another_hook(
    guarded: Served, tmp_path: Path
) -> None:
    done = run_cli("hook", "install")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("error: hook install needs --bare PATH;")
    done = run_cli("hook", "install", "--bare", str(guarded.clone.path))
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {guarded.clone.path} is not a bare repository;")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (guarded.clone.path / "hooks").exists()
    bare = tmp_path / "theirs.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    (bare / "hooks" / "pre-receive").write_text("#!/bin/sh\nexit 0\n")
    done = run_cli("hook", "install", "--bare", str(bare))
    assert done.returncode == 2
    assert "is another pre-receive hook; " in done.stderr and "--force" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert (bare / "hooks" / "pre-receive").read_text() == "#!/bin/sh\nexit 0\n"
    assert run_cli("hook", "install", "--bare", str(bare), "--force").returncode == 0
    assert sys.executable in (bare / "hooks" / "pre-receive").read_text()
    assert git(bare, "config", "receive.advertisePushOptions").strip() == "true"


def test_install_refuses_a_repository_whose_hooks_git_runs_from_elsewhere(tmp_path: Path) -> None:
    """With ``core.hooksPath`` set, git never runs ``hooks/pre-receive``: an install there would
    say the guard is on while every push goes through unchecked."""
    bare = tmp_path / "app.git"
    shared = tmp_path / "shared-hooks"
    shared.mkdir()
    git(tmp_path, "init", "-q", "--bare", str(bare))
    git(bare, "config", "core.hooksPath", str(shared))
    done = run_cli("hook", "install", "--bare", str(bare))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"error: git runs the hooks of {bare} from {shared}")
    assert "core.hooksPath" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (bare / "hooks" / "pre-receive").exists()
    assert list(shared.iterdir()) == []
    assert "advertisepushoptions" not in (bare / "config").read_text().lower()
    # Pointing at the repository's own hooks/ (relative to it, as git reads it) is no detour.
    git(bare, "config", "core.hooksPath", "hooks")
    done = run_cli("hook", "install", "--bare", str(bare))
    assert done.returncode == 0, done.stderr
    assert sys.executable in (bare / "hooks" / "pre-receive").read_text()


def test_a_push_the_hook_cannot_judge_is_refused_in_one_line_for_the_pusher(
    tmp_path: Path,
) -> None:
    """What the hook prints goes to the pushing client (and to the model reading its error):
    one line saying the server could not check the push, no advice to run 'recover' in a
    clone that has nothing to recover, no traceback, no path of the server's."""
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", str(work))
    (work / "a.txt").write_text("a\n")
    git(work, "add", "a.txt")
    git(work, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "a")
    bare = tmp_path / "app.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    commit_id = git(work, "rev-parse", "HEAD").strip()
    blob = git(work, "rev-parse", "HEAD:a.txt").strip()
    # An old value that is no commit (a client's own claim: receive-pack passes it through).
    done = run_cli(
        "hook",
        "pre-receive",
        input=f"{blob} {commit_id} refs/heads/main\n",
        env={"GIT_DIR": str(bare)},
    )
    assert (done.returncode, done.stdout) == (3, "")
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(
        "applyonce: refs/heads/main: the server's guard could not check this push ("
    )
    assert lines[0].endswith("; the push is refused: push again, or ask the server's admin")
    assert "recover" not in done.stderr and "Traceback" not in done.stderr
    assert str(tmp_path) not in done.stderr


def test_install_force_keeps_the_users_hook_and_runs_it_first(tmp_path: Path) -> None:
    """``--force`` over the server's own pre-receive hook (a protected-branch check, say) keeps
    it, byte for byte, and runs it first with the same stdin: its refusal still refuses, and
    what it lets through is then checked for calls landing twice."""
    work = tmp_path / "work"
    git(tmp_path, "init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    git(work, "add", "a.txt")
    git(work, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "a")
    bare = tmp_path / "app.git"
    git(tmp_path, "clone", "-q", "--bare", str(work), str(bare))
    theirs = (
        "#!/bin/sh\n"
        f"cat > '{tmp_path}/seen'\n"
        f"if [ -e '{tmp_path}/closed' ]; then echo 'branch is closed'; exit 1; fi\n"
    )
    (bare / "hooks" / "pre-receive").write_text(theirs)
    (bare / "hooks" / "pre-receive").chmod(0o755)
    done = run_cli("hook", "install", "--bare", str(bare), "--force")
    assert done.returncode == 0, done.stderr
    kept = bare / "hooks" / "pre-receive.chained"
    assert done.stdout == (
        f"installed {bare / 'hooks' / 'pre-receive'} (the hook that was there kept as {kept},"
        " run first)\n"
    )
    assert kept.read_text() == theirs
    ident = ("-c", "user.name=a", "-c", "user.email=a@b")
    git(work, *ident, "commit", "-q", "--allow-empty", "-m", f"one\n\nCall-Id: {CALL}")
    first = git(work, "rev-parse", "HEAD").strip()
    git(work, "push", "-q", str(bare), "main")
    before = git(work, "rev-parse", "HEAD~1").strip()
    assert (tmp_path / "seen").read_text().split() == [before, first, "refs/heads/main"]
    # Their refusal refuses.
    (tmp_path / "closed").write_text("")
    git(work, *ident, "commit", "-q", "--allow-empty", "-m", f"two\n\nCall-Id: {OTHER}")
    done = subprocess.run(
        ["git", "-C", str(work), "push", str(bare), "main"], capture_output=True, text=True
    )
    assert done.returncode != 0 and "remote: branch is closed" in done.stderr
    assert git(bare, "rev-parse", "main").strip() == first
    # What they let through is still checked.
    (tmp_path / "closed").unlink()
    git(work, *ident, "commit", "-q", "--allow-empty", "-m", f"again\n\nCall-Id: {CALL}")
    done = subprocess.run(
        ["git", "-C", str(work), "push", str(bare), "main"], capture_output=True, text=True
    )
    assert refusal(MAIN, CALL, first) in done.stderr
    assert git(bare, "rev-parse", "main").strip() == first
    # Installing again (this Python, or another) replaces applyonce's own hook, no --force.
    done = run_cli("hook", "install", "--bare", str(bare))
    assert done.returncode == 0, done.stderr
    assert kept.read_text() == theirs


# --- applyonce's client against the hook ---------------------------------------------------


def test_the_publisher_reads_the_refusal_as_the_call_on_the_branch(guarded: Served) -> None:
    first = commit(guarded.clone, "first", CALL)
    assert push(guarded.clone, "origin", "main").returncode == 0
    tree = guarded.clone.git("rev-parse", "HEAD^{tree}").strip()
    again = guarded.clone.git(
        "commit-tree", tree, "-p", first, "-m", f"again\n\nCall-Id: {CALL}\n"
    ).strip()
    store = GitStore(guarded.clone.path)
    publisher = RemotePublisher(store, "origin", CallIdIndex(store, MemoryHistoryCache))
    with pytest.raises(CallOnBranchError) as raised:
        publisher.publish(MAIN, first, again, reason="test")
    assert (raised.value.call_id, raised.value.commit) == (CALL, first)
    assert guarded.server_git("rev-parse", "main").strip() == first
    assert guarded.server_git("for-each-ref", "refs/applyonce/pending/") == ""


def test_a_client_blind_to_the_landed_call_adopts_it_never_commits_twice(
    guarded: Served, tmp_path: Path
) -> None:
    """Two clones without a shared ledger, the second a shallow clone whose search for the call
    misses it (as another tool's, or an older client's, would): the server's hook refuses its
    commit, and the call adopts the one already there, as a replay."""
    run = apply_remote(guarded.clone, UTIL_PATCH, "--json")
    assert run.returncode == 0, run.stderr
    landed = json.loads(run.stdout)
    # Someone reverts it by hand: the patch applies to the tip again, the call is on the branch.
    guarded.clone.git("revert", "--no-edit", "HEAD")
    guarded.clone.git("push", "-q", "origin", "main")
    reverted = guarded.clone.head()
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth=1", guarded.url, str(shallow))
    executor = Executor(shallow, remote="origin")
    try:
        executor.context.publisher.landed = lambda *args, **kwargs: []  # type: ignore[method-assign]
        receipt = executor.apply(UTIL_PATCH)
    finally:
        executor.close()
    assert receipt.status == "committed"
    assert receipt.call_id == landed["call_id"]
    assert receipt.commit == landed["commit"]
    assert server_calls(guarded) == [landed["call_id"]]
    assert guarded.server_git("rev-parse", "main").strip() == reverted
    assert guarded.server_git("for-each-ref", "refs/applyonce/pending/") == ""


def test_applyonce_names_its_call_in_a_push_option(guarded: Served) -> None:
    """Where the server advertises push options (``hook install`` sets it), applyonce's publish
    names its call in one, so the guard checks it whatever the commit's trailers say."""
    hook = guarded.server / "hooks" / "pre-receive"
    seen = guarded.server / "options.log"
    original = hook.read_text()
    hook.write_text(
        "#!/bin/sh\n"
        f'env | grep "^GIT_PUSH_OPTION_[0-9]" | cut -d= -f2- >> "{seen}"\n'
        + original.removeprefix("#!/bin/sh\n")
    )
    run = apply_remote(guarded.clone, UTIL_PATCH, "--json")
    assert run.returncode == 0, run.stderr
    call_id = json.loads(run.stdout)["call_id"]
    # Both pushes of the publish (the objects under a pending ref, then the branch) name it.
    assert seen.read_text().splitlines() == [f"call-id={call_id}"] * 2
    assert server_calls(guarded) == [call_id]
