"""One call made from several clones of one remote, with a shared PostgreSQL ledger or ledgers
of their own: it lands once, each clone answers the same commit, a tampered shared receipt is
reported, and a remote without the branch is refused before anything is pushed.

Every test runs real processes: the CLI, a real ``git daemon`` (``served``) and, where a ledger is
shared, a real PostgreSQL server (``pg_url``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import UTIL_PATCH, Served, git, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")


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
    first = run_cli(
        "apply", "-", "--repo", str(served.clone.path), *fleet, "--json", input=UTIL_PATCH
    )
    assert first.returncode == 0, first.stderr
    call_id = json.loads(first.stdout)["call_id"]
    with psycopg.connect(pg_url, autocommit=True) as conn:
        (body,) = conn.execute(
            "SELECT body FROM receipts WHERE call_id = %s", (call_id,)
        ).fetchone()
        forged = bytes(body).replace(b'"updated_at": "2', b'"updated_at": "1')
        assert forged != bytes(body)
        conn.execute(
            "UPDATE receipts SET body = %s, sha256 = %s WHERE call_id = %s",
            (forged, hashlib.sha256(forged).hexdigest(), call_id),
        )
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
    run = run_cli(
        "apply", "-", "--repo", str(clone.path), "--remote", "origin", input=NEW_FILE_PATCH
    )
    assert run.returncode == 4, run.stdout + run.stderr
    assert "git push origin main" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert git(served.daemon.path_of(empty), "for-each-ref").strip() == ""
    assert (clone.files(), clone.head()) == before
    # Once the branch is there, the same call lands on it.
    clone.git("push", "-q", "origin", "main")
    again = run_cli(
        "apply", "-", "--repo", str(clone.path), "--remote", "origin", input=NEW_FILE_PATCH
    )
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

    killed = run_cli(
        "apply",
        "-",
        "--repo",
        str(served.clone.path),
        "--remote",
        "origin",
        input=UTIL_PATCH,
        env={"APPLYONCE_FAULT": "after-push-objects"},
    )
    assert killed.returncode == -9
    other = served.another_clone(tmp_path / "other")
    made = run_cli(
        "apply", "-", "--repo", str(other.path), "--remote", "origin", "--json", input=UTIL_PATCH
    )
    assert made.returncode == 0, made.stderr
    done = run_cli("recover", "--repo", str(served.clone.path), "--remote", "origin")
    assert done.returncode == 0, done.stdout + done.stderr
    out = served.server_git("log", "--format=%(trailers:key=Call-Id,valueonly)", "main")
    assert [line for line in out.splitlines() if line.strip()] == [
        json.loads(made.stdout)["call_id"]
    ]
    assert served.server_git("for-each-ref", "refs/applyonce/").strip() == ""
    shown = run_cli(
        "show",
        json.loads(made.stdout)["call_id"],
        "--repo",
        str(served.clone.path),
        "--remote",
        "origin",
        "--json",
    )
    assert json.loads(shown.stdout)["commit"] == json.loads(made.stdout)["commit"]
