"""Audit finds, by call ID, each way the record and Git can disagree; replay and resolve."""

from __future__ import annotations

import shutil
import signal

import orjson
import pytest

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, run_cli
from tests.e2e.crash.records import SECOND, apply, audit

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

# Adds a line after an anchor that stays: it applies again on top of itself.
ANCHORED = "*** Begin Patch\n*** Update File: notes.md\n@@\n # notes\n+added\n*** End Patch\n"


def test_clean_repo_audits_clean(repo: Repo) -> None:
    apply(repo)
    apply(repo, SECOND)
    result = run_cli("audit", "--repo", str(repo.path))
    assert result.returncode == 0
    assert (
        result.stdout == "audited 2 Call-Id commit(s) on refs/heads/main and 2 receipt(s): clean\n"
    )


def test_edited_digests_are_found(repo: Repo) -> None:
    receipt = apply(repo)
    path = repo.state_dir() / "receipts" / f"{receipt['call_id']}.json"
    data = orjson.loads(path.read_bytes())
    data["files"][0]["sha256"] = "f" * 64
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n")
    code, problems = audit(repo)
    assert code == 1
    assert [(p["kind"], p["call_id"]) for p in problems] == [("tampered", receipt["call_id"])]
    text = run_cli("audit", "--repo", str(repo.path)).stdout
    assert (
        f"tampered     {receipt['call_id'][:12]}  receipt {receipt['call_id'][:12]} was changed"
        in text
    )


def test_edited_digests_are_found_even_without_the_ledger(repo: Repo) -> None:
    receipt = apply(repo)
    path = repo.state_dir() / "receipts" / f"{receipt['call_id']}.json"
    data = orjson.loads(path.read_bytes())
    data["files"][0]["sha256"] = "f" * 64
    path.write_bytes(orjson.dumps(data))
    (repo.state_dir() / "ledger.sqlite3").unlink()
    code, problems = audit(repo)
    assert code == 1
    assert problems[0]["kind"] == "mismatch" and "forged sha256" in problems[0]["message"]


def test_deleted_receipt_is_found(repo: Repo) -> None:
    receipt = apply(repo)
    (repo.state_dir() / "receipts" / f"{receipt['call_id']}.json").unlink()
    code, problems = audit(repo)
    assert code == 1
    assert [(p["kind"], p["call_id"]) for p in problems] == [("no-receipt", receipt["call_id"])]


def test_a_call_reverted_then_cherry_picked_again_is_on_the_branch_once(repo: Repo) -> None:
    """The user reverted the call's commit, then cherry-picked it back: two commits carry the
    Call-Id, and the change stands once. Audit said "user-rewrite … run 'applyonce recover' to
    record it" (recover had nothing to do) and "duplicate … undo the later commit's change"
    (which would remove the change altogether). It is clean, the undone commit counted."""
    receipt = apply(repo)
    repo.git("revert", "--no-edit", "HEAD")
    repo.git("cherry-pick", receipt["commit"])
    result = run_cli("audit", "--repo", str(repo.path))
    assert result.returncode == 0, result.stdout
    assert result.stdout == (
        "1 commit(s) carrying a call's change were undone by a later commit (git revert); the "
        "change of each such call stands at most once\n"
        "audited 2 Call-Id commit(s) on refs/heads/main and 1 receipt(s): clean\n"
    )
    report = orjson.loads(run_cli("audit", "--repo", str(repo.path), "--json").stdout)
    assert (report["clean"], report["undone"]) == (True, 1)
    # The call's receipt stands as it was, and a repeat replays it.
    again = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH)
    assert again.returncode == 0 and "replayed" in again.stderr


def test_a_call_applied_twice_is_a_duplicate_until_the_later_copy_is_reverted(
    repo: Repo,
) -> None:
    """A second commit with the call's trailers and its change applied again on top (the
    change is there twice): a duplicate; the hint's 'git revert' of the later commit makes the
    next audit clean."""
    (repo.path / "notes.md").write_text("# notes\nend\n")
    repo.git("add", "notes.md")
    repo.git("commit", "-q", "-m", "notes")
    receipt = apply(repo, ANCHORED)
    assert (repo.path / "notes.md").read_text() == "# notes\nadded\nend\n"
    (repo.path / "notes.md").write_text("# notes\nadded\nadded\nend\n")
    repo.git("commit", "-q", "-a", "-C", receipt["commit"])  # its message, trailers and all
    later = repo.head()
    result = run_cli("audit", "--repo", str(repo.path))
    assert result.returncode == 1
    call = receipt["call_id"][:12]
    assert result.stdout.splitlines()[0] == (
        f"duplicate    {call}  commits {receipt['commit'][:12]} and {later[:12]} both carry "
        "this Call-Id and its change, and no later commit undid either; if the change is there "
        f"twice, undo the later one with 'git revert {later[:12]}' (audit then counts it as "
        "undone)"
    )
    repo.git("revert", "--no-edit", later)
    assert (repo.path / "notes.md").read_text() == "# notes\nadded\nend\n"
    clean = run_cli("audit", "--repo", str(repo.path))
    assert clean.returncode == 0 and clean.stdout.endswith(": clean\n"), clean.stdout


def test_a_lost_record_of_a_call_two_commits_carry_says_which_commit_to_resolve(
    repo: Repo,
) -> None:
    """Reverted and cherry-picked, then the state directory lost: the call's record is rebuilt
    as unknown (two commits carry it). Each text on the way names what 'resolve' needs
    (--commit, and which one), and following them makes audit clean."""
    receipt = apply(repo)
    repo.git("revert", "--no-edit", "HEAD")
    repo.git("cherry-pick", receipt["commit"])
    picked = repo.head()
    shutil.rmtree(repo.state_dir())
    call = receipt["call_id"][:12]
    ours, theirs = receipt["commit"][:12], picked[:12]
    decide = (
        f"decide which commit is the call's ({theirs} or {ours}; 'applyonce audit' counts one a "
        f"later commit undid), then run 'applyonce resolve {call} --as committed --commit "
        "COMMIT --note TEXT'"
    )
    exact = (
        f"run 'applyonce resolve {call} --as committed --commit {theirs} --note TEXT' ({theirs} "
        "is the one no later commit undid)"
    )

    audited = run_cli("audit", "--repo", str(repo.path))
    assert audited.returncode == 1
    assert audited.stdout.splitlines()[0] == (
        f"no-receipt   {call}  commit {theirs} has no receipt; run 'applyonce recover' to "
        f"record it; then {exact}"
    )
    repeated = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH)
    assert repeated.returncode == 5
    assert repeated.stderr == (
        f"error: 2 commits carry call {call}; run 'applyonce recover' to record it; then {decide}\n"
    )
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert f"{call}  claimed    unknown    2 commits carry this Call-Id; {decide}" in (
        recovered.stdout
    )
    after = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH)
    assert after.returncode == 5
    assert after.stderr == (
        f"error: call {call}'s outcome is unknown: 2 commits carry this Call-Id; {decide}\n"
    )
    audited = run_cli("audit", "--repo", str(repo.path))
    assert audited.stdout.splitlines()[0] == (
        f"unknown      {call}  the call's outcome is unknown (2 commits carry this Call-Id); "
        f"{exact}"
    )
    refused = run_cli("resolve", call, "--as", "committed", "--note", "x", "--repo", str(repo.path))
    assert refused.returncode == 2
    assert refused.stderr == (
        "error: 2 commits on refs/heads/main carry this Call-Id; pass --commit with the one "
        f"that counts ({theirs} or {ours})\n"
    )
    resolve = ("resolve", call, "--as", "committed", "--commit", theirs, "--note", "picked")
    resolved = run_cli(*resolve, "--repo", str(repo.path))
    assert resolved.returncode == 0, resolved.stderr
    clean = run_cli("audit", "--repo", str(repo.path))
    assert clean.returncode == 0 and clean.stdout.endswith(": clean\n"), clean.stdout


def test_commit_no_longer_on_branch_is_found(repo: Repo) -> None:
    receipt = apply(repo)
    repo.git("reset", "-q", "--hard", "HEAD~1")
    code, problems = audit(repo)
    assert code == 1
    assert [(p["kind"], p["call_id"]) for p in problems] == [("unreachable", receipt["call_id"])]


def test_interrupted_call_is_pending_until_recovered(repo: Repo) -> None:
    apply(repo, env={"APPLYONCE_FAULT": "after-prepared"})
    code, problems = audit(repo)
    assert code == 1 and problems[0]["kind"] == "pending"
    run_cli("recover", "--repo", str(repo.path))
    assert audit(repo)[0] == 0


def test_forged_trailer_is_found(repo: Repo) -> None:
    receipt = apply(repo)
    message = repo.git("log", "-1", "--format=%B").replace("Attempt: 1", "Attempt: 2")
    repo.git("commit", "-q", "--amend", "-m", message)
    _code, problems = audit(repo)
    kinds = [(p["kind"], p["call_id"]) for p in problems]
    assert ("identity", receipt["call_id"]) in kinds


def test_replay_rederives_every_output_and_finds_a_forged_one(repo: Repo) -> None:
    apply(repo)
    rejected = run_cli(
        "apply",
        "-",
        "--repo",
        str(repo.path),
        "--json",
        input=PATCH.replace("VALUE = 1", "VALUE = 9"),
    )
    assert rejected.returncode == 1
    result = run_cli("replay", "--repo", str(repo.path))
    assert result.returncode == 0
    assert result.stdout.endswith("replayed 2 call(s): all agree\n")
    # Forge an output consistently (its digest too): the ledger digest and the derivation catch it.
    receipt = orjson.loads(rejected.stdout)
    path = repo.state_dir() / "receipts" / f"{receipt['call_id']}.json"
    import hashlib

    forged = dict(receipt, output="Success. Updated the following files:\nM src/util.py\n")
    forged["output_sha256"] = hashlib.sha256(forged["output"].encode()).hexdigest()
    path.write_bytes(orjson.dumps(forged))
    result = run_cli("replay", "--repo", str(repo.path), "--json")
    assert result.returncode == 1
    report = orjson.loads(result.stdout)
    assert report["disagreements"] == 1


def test_unknown_outcome_needs_a_person_then_resolves(repo: Repo) -> None:
    first = run_cli(
        "apply",
        "-",
        "--repo",
        str(repo.path),
        input=PATCH,
        env={"APPLYONCE_FAULT": "after-publish"},
    )
    assert first.returncode == -signal.SIGKILL
    commit = repo.head()
    # The crash left the checkout unsynced, and the index.lock the call held: the user removes
    # it by hand (as git says) and rewrites the branch.
    (repo.path / ".git" / "index.lock").unlink()
    repo.git("reset", "-q", "--hard")
    repo.git("revert", "--no-edit", "HEAD")
    repo.git("cherry-pick", commit)
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 5
    assert "unknown" in recovered.stdout
    assert f"run 'applyonce resolve {repo.call_ids()[0][:12]} --as committed --commit" in (
        recovered.stdout
    )
    again = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH)
    assert again.returncode == 5 and "outcome is unknown" in again.stderr
    call_id = repo.call_ids()[0]
    ambiguous = run_cli(
        "resolve", call_id, "--as", "committed", "--note", "x", "--repo", str(repo.path)
    )
    assert ambiguous.returncode == 2 and "pass --commit" in ambiguous.stderr
    done = run_cli(
        "resolve",
        call_id,
        "--as",
        "committed",
        "--commit",
        commit,
        "--note",
        "the first one counts",
        "--repo",
        str(repo.path),
        "--json",
    )
    assert done.returncode == 0, done.stderr
    receipt = orjson.loads(done.stdout)
    assert receipt["status"] == "committed" and receipt["commit"] == commit
    assert receipt["note"] == "the first one counts"
    replayed = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH)
    assert replayed.returncode == 0
    twice = run_cli("resolve", call_id, "--as", "rejected", "--note", "x", "--repo", str(repo.path))
    assert twice.returncode == 2 and "is committed" in twice.stderr


def test_audit_since_limits_the_walk(repo: Repo) -> None:
    first = apply(repo)
    apply(repo, SECOND)
    result = run_cli("audit", "--repo", str(repo.path), "--since", first["commit"], "--json")
    assert result.returncode == 0
    assert orjson.loads(result.stdout)["commits"] == 1
    bad = run_cli("audit", "--repo", str(repo.path), "--since", "no-such-rev")
    assert bad.returncode == 2 and bad.stderr.startswith("error: 'no-such-rev' is not a commit")


def test_inspection_commands_create_no_state(repo: Repo) -> None:
    assert run_cli("log", "--repo", str(repo.path)).stdout == "no calls yet\n"
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
    assert run_cli("replay", "--repo", str(repo.path)).stdout == "replayed 0 call(s): all agree\n"
    assert not repo.state_dir().exists()
