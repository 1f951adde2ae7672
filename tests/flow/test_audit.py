"""Audit finds, by call ID, each way the record and Git can disagree; replay and resolve."""

from __future__ import annotations

import signal

import orjson

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, run_cli
from tests.flow.records import SECOND, apply, audit


def test_clean_repo_audits_clean(repo: Repo) -> None:
    apply(repo)
    apply(repo, SECOND)
    result = run_cli("audit", "--repo", str(repo.path))
    assert result.returncode == 0
    assert result.stdout == "audited 2 Call-Id commit(s) on refs/heads/main and 2 receipt(s): clean\n"


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
    assert f"tampered     {receipt['call_id'][:12]}  receipt {receipt['call_id'][:12]} was changed" in text


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


def test_second_commit_with_same_call_id_is_found(repo: Repo) -> None:
    receipt = apply(repo)
    repo.git("revert", "--no-edit", "HEAD")
    repo.git("cherry-pick", receipt["commit"])
    code, problems = audit(repo)
    assert code == 1
    kinds = {(p["kind"], p["call_id"]) for p in problems}
    assert ("duplicate", receipt["call_id"]) in kinds


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
    rejected = run_cli("apply", "-", "--repo", str(repo.path), "--json", input=PATCH.replace("VALUE = 1", "VALUE = 9"))
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
    first = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH, env={"APPLYONCE_FAULT": "after-publish"})
    assert first.returncode == -signal.SIGKILL
    commit = repo.head()
    repo.git("reset", "-q", "--hard")  # the crash left the checkout unsynced
    repo.git("revert", "--no-edit", "HEAD")
    repo.git("cherry-pick", commit)
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 5
    assert "unknown" in recovered.stdout and "run 'applyonce resolve'" in recovered.stdout
    again = run_cli("apply", "-", "--repo", str(repo.path), input=PATCH)
    assert again.returncode == 5 and "outcome is unknown" in again.stderr
    call_id = repo.call_ids()[0]
    ambiguous = run_cli("resolve", call_id, "--as", "committed", "--note", "x", "--repo", str(repo.path))
    assert ambiguous.returncode == 2 and "pass --commit" in ambiguous.stderr
    done = run_cli("resolve", call_id, "--as", "committed", "--commit", commit,
                   "--note", "the first one counts", "--repo", str(repo.path), "--json")
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
