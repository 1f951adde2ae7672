"""Audit follows a landing to its lane call (docs/design.md §12, "Lanes"): a landing commit whose
``Lands-Call-Id`` or ``Lane-Commit`` is not the lane call its landing recorded is reported as
``landing-mismatch`` (exit 1), even when its receipt and ledger row were forged to match it."""

from __future__ import annotations

import hashlib
import sqlite3

import orjson
import pytest

from tests.conftest import Repo, run_cli
from tests.e2e.calls.test_lanes import UTIL_2, land, lane_apply

OTHER_CALL = "f" * 64


@pytest.mark.parametrize("trailer", ["Lane-Commit", "Lands-Call-Id"])
def test_a_forged_landing_commit_is_a_landing_mismatch(repo: Repo, trailer: str) -> None:
    base = repo.head()
    lane_apply(repo, UTIL_2, "a")
    code, report = land(repo, "--lane", "a")
    assert code == 0, report
    clean = run_cli("audit", "--repo", str(repo.path), "--full")
    assert clean.returncode == 0, clean.stdout

    # The forger rewrites the landing commit with another lane commit (or lane call) in its
    # trailers, keeps its tree, parent and Call-Id block, moves main to it, and makes the
    # landing's receipt and ledger row name the new commit.
    landing = repo.head()
    message = repo.git("log", "-1", "--format=%B", landing)
    trailers = repo.git("log", "-1", "--format=%(trailers:only,unfold)", landing)
    landing_id = _value(trailers, "Call-Id")
    genuine = _value(trailers, trailer)
    forged_value = base if trailer == "Lane-Commit" else OTHER_CALL
    assert genuine != forged_value
    forged = repo.git(
        "commit-tree",
        f"{landing}^{{tree}}",
        "-p",
        f"{landing}^",
        "-m",
        message.replace(f"{trailer}: {genuine}", f"{trailer}: {forged_value}"),
    ).strip()
    repo.git("update-ref", "refs/heads/main", forged, landing)
    path = repo.state_dir() / "receipts" / f"{landing_id}.json"
    receipt = orjson.loads(path.read_bytes())
    assert receipt["commit"] == landing
    receipt["commit"] = forged
    data = orjson.dumps(receipt, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
    path.write_bytes(data)
    with sqlite3.connect(repo.state_dir() / "ledger.sqlite3") as db:
        db.execute(
            "UPDATE calls SET commit_id = ?, receipt_sha256 = ? WHERE call_id = ?",
            (forged, hashlib.sha256(data).hexdigest(), landing_id),
        )
    db.close()
    files = repo.files()
    refs = repo.git("for-each-ref")

    result = run_cli("audit", "--repo", str(repo.path), "--full", "--json")
    assert result.returncode == 1, result.stdout
    problems = orjson.loads(result.stdout)["problems"]
    assert [(p["kind"], p["call_id"]) for p in problems] == [("landing-mismatch", landing_id)]
    assert problems[0]["message"] == (
        f"landing commit {forged[:12]}: its Lands-Call-Id or Lane-Commit is not the lane call "
        "it recorded"
    )
    text = run_cli("audit", "--repo", str(repo.path), "--full")
    assert text.returncode == 1
    assert f"landing-mismatch {landing_id[:12]}" in text.stdout
    assert "run 'applyonce audit --ref' on the lane, then 'applyonce recover'" in text.stdout
    # Audit only reads: nothing it was shown changed.
    assert repo.files() == files and repo.git("for-each-ref") == refs


def _value(trailers: str, key: str) -> str:
    [value] = [
        line.split(": ", 1)[1] for line in trailers.splitlines() if line.startswith(f"{key}: ")
    ]
    return value.strip()
