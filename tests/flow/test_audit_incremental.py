"""Incremental audit (issue 27, item 3): a clean audit records a checkpoint; the next one checks
it against Git and the ledger, then audits only what is new. A rewrite below the checkpoint, a
receipt edited since, a forged or damaged checkpoint file: each is still found (the whole history
audited again, and the report says why)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

import applyonce.git.store as store_module
from applyonce import Executor
from applyonce.core.trailers import Trailers
from applyonce.git.store import GitStore
from applyonce.state.checkpoints import AUDIT_FILE, digest
from applyonce.state.receipts import ReceiptStore
from tests.conftest import Repo, run_cli


def add(i: int) -> str:
    return f"*** Begin Patch\n*** Add File: c{i}.txt\n+{i}\n*** End Patch\n"


def calls(repo: Repo, n: int, start: int = 0) -> list[str]:
    executor = Executor(repo.path)
    commits = [str(executor.apply(add(i)).commit) for i in range(start, start + n)]
    executor.close()
    return commits


def audit(repo: Repo, **kw: Any) -> Any:
    executor = Executor(repo.path)
    try:
        return executor.audit(**kw)
    finally:
        executor.close()


def checkpoint_file(repo: Repo) -> Path:
    return repo.state_dir() / AUDIT_FILE


def test_a_second_audit_checks_only_what_is_new_and_says_so(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = calls(repo, 3)
    report = audit(repo)
    assert report.clean and report.incremental is None and report.full_why is None
    saved = orjson.loads(checkpoint_file(repo).read_bytes())["refs"]["refs/heads/main"]
    assert (saved["tip"], saved["commits"], saved["rows"]) == (first[-1], 3, 3)
    calls(repo, 1, start=3)
    counts: Counter[str] = Counter()
    parse, load = store_module.parse_trailers, ReceiptStore.load

    def counting_parse(message: bytes, **kw: Any) -> Trailers:
        counts["trailer parses"] += 1
        return parse(message, **kw)

    def counting_load(self: ReceiptStore, call_id: str, **kw: Any) -> Any:
        counts["receipt loads"] += 1
        return load(self, call_id, **kw)

    monkeypatch.setattr(store_module, "parse_trailers", counting_parse)
    monkeypatch.setattr(ReceiptStore, "load", counting_load)
    report = audit(repo)
    assert report.clean and (report.commits, report.receipts) == (1, 4)
    assert report.incremental is not None
    assert (report.incremental.since, report.incremental.verified) == (first[-1], 3)
    # Only the new call's commit is parsed and its receipt read and verified.
    assert counts == Counter({"trailer parses": 1, "receipt loads": 1}), counts
    monkeypatch.undo()

    # The checkpoint moved to the new tip: the CLI says what it checked, and since when.
    at = orjson.loads(checkpoint_file(repo).read_bytes())["refs"]["refs/heads/main"]["at"]
    calls(repo, 1, start=4)
    result = run_cli("audit", "--repo", str(repo.path))
    assert result.returncode == 0, result.stderr
    tip = repo.git("rev-parse", "HEAD~1").strip()
    assert result.stdout == (
        f"checked 1 new Call-Id commit(s) on refs/heads/main since {tip[:12]}; 4 before "
        f"verified at {at}; 5 receipt(s): clean\n"
    )
    full = run_cli("audit", "--repo", str(repo.path), "--full")
    assert full.returncode == 0
    assert full.stdout == "audited 5 Call-Id commit(s) on refs/heads/main and 5 receipt(s): clean\n"
    as_json = orjson.loads(run_cli("audit", "--repo", str(repo.path), "--json").stdout)
    assert as_json["incremental"]["verified"] == 5 and as_json["commits"] == 0


def test_a_receipt_edited_after_the_checkpoint_is_found(repo: Repo) -> None:
    calls(repo, 2)
    assert audit(repo).clean
    receipt = next((repo.state_dir() / "receipts").glob("*.json"))
    data = orjson.loads(receipt.read_bytes())
    data["files"][0]["sha256"] = "f" * 64
    receipt.write_bytes(orjson.dumps(data))
    report = audit(repo)
    assert report.incremental is not None  # the checkpoint holds: Git and the ledger agree
    assert [(p.kind, p.call_id) for p in report.problems] == [("tampered", receipt.stem)]
    # A dirty audit moves no checkpoint: the next one finds it again.
    assert [p.kind for p in audit(repo).problems] == ["tampered"]


def test_a_rewrite_below_the_checkpoint_is_found(repo: Repo) -> None:
    commits = calls(repo, 3)
    assert audit(repo).clean
    repo.git("reset", "-q", "--hard", commits[0])  # drops the two later calls' commits
    report = audit(repo)
    assert report.incremental is None
    assert report.full_why == (
        f"the audit checkpoint's tip {commits[-1][:12]} is no longer on refs/heads/main (the "
        "history was rewritten below it: a force-push, a rebase, a dropped commit)"
    )
    assert sorted((p.kind, p.commit) for p in report.problems) == sorted(
        [("unreachable", commits[1]), ("unreachable", commits[2])]
    )
    result = run_cli("audit", "--repo", str(repo.path))
    assert result.returncode == 1
    assert f"whole history audited: {report.full_why}\n" in result.stdout


def test_a_dropped_commit_below_the_checkpoint_is_found(repo: Repo) -> None:
    commits = calls(repo, 3)
    assert audit(repo).clean
    repo.git("rebase", "-q", "--onto", commits[0], commits[1])  # drops the second call
    report = audit(repo)
    assert report.incremental is None and report.full_why is not None
    assert "unreachable" in {p.kind for p in report.problems}


def _forge(repo: Repo, call_commit: str) -> str:
    """The user's commit whose message copies a call's trailer block, with another change."""
    message = repo.git("log", "-1", "--format=%B", call_commit)
    (repo.path / "other.txt").write_text("not the call's change\n")
    repo.git("add", "other.txt")
    path = repo.path.parent / "message.txt"
    path.write_text(message)
    repo.git("commit", "-q", "-F", str(path))
    return repo.head()


@pytest.mark.parametrize("digests", ["kept", "recomputed"])
def test_a_forged_checkpoint_file_is_not_trusted(repo: Repo, digests: str) -> None:
    commits = calls(repo, 2)
    assert audit(repo).clean
    forged = _forge(repo, commits[0])
    # Someone moves the checkpoint over the forged commit, so that audit would skip it.
    doc = orjson.loads(checkpoint_file(repo).read_bytes())
    entry = doc["refs"]["refs/heads/main"]
    entry["tip"] = forged
    if digests == "recomputed":
        # What Git says up to the forged commit: the counts now hold, and the forged commit,
        # not a call's own recorded commit, is still checked.
        named = GitStore(repo.path).commits_naming(forged, "Call-Id")
        entry["commits"], entry["digest"] = digest(named)
    checkpoint_file(repo).write_bytes(orjson.dumps(doc))
    report = audit(repo)
    assert [(p.kind, p.commit) for p in report.problems] == [("forged", forged)]
    if digests == "kept":
        assert report.full_why == (
            f"the audit checkpoint does not match Git's history up to {forged[:12]}"
        )
    else:
        assert report.incremental is not None


def test_a_damaged_checkpoint_file_means_a_full_audit(repo: Repo) -> None:
    calls(repo, 2)
    assert audit(repo).clean
    checkpoint_file(repo).write_text("{not json")
    report = audit(repo)
    assert report.clean and report.incremental is None
    assert report.full_why == "the audit checkpoint is not usable (audit.json is not JSON)"
    assert audit(repo).incremental is not None  # the clean full audit wrote a good one


def test_a_ledger_row_changed_since_the_checkpoint_means_a_full_audit(repo: Repo) -> None:
    calls(repo, 2)
    assert audit(repo).clean
    executor = Executor(repo.path)
    executor.ledger.db.execute("UPDATE calls SET commit_id = ? WHERE rowid = 1", ("0" * 40,))
    executor.close()
    report = audit(repo)
    assert report.full_why == "the ledger rows the audit checkpoint checked have changed since"


def test_a_receipt_made_a_symlink_to_its_own_bytes_is_not_trusted(repo: Repo) -> None:
    """The incremental pass hashes a receipt only as a regular file, never through a symlink:
    one put there (even to a file with the very bytes) goes through the whole check, which
    says what is wrong."""
    calls(repo, 2)
    assert audit(repo).clean
    receipt = next((repo.state_dir() / "receipts").glob("*.json"))
    copy = repo.path.parent / "elsewhere.json"
    copy.write_bytes(receipt.read_bytes())
    receipt.unlink()
    receipt.symlink_to(copy)
    report = audit(repo)
    assert report.incremental is not None
    assert [(p.kind, p.call_id) for p in report.problems] == [("tampered", receipt.stem)]
    assert "symlink" in report.problems[0].message
