"""What makes two calls one call, and what a repeat returns: the stored receipt byte for byte,
for every equivalent spelling; a new attempt or contract is a new call; a forged receipt is
never returned."""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest

from tests.conftest import APP_PATCH as PATCH
from tests.conftest import Repo, apply, stored_json, stored_text

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")


def test_same_call_twice_makes_one_commit_and_identical_output(repo: Repo) -> None:
    first = apply(repo, PATCH, "--json")
    second = apply(repo, PATCH, "--json")
    assert first.returncode == second.returncode == 0
    assert stored_json(first.stdout) == stored_json(second.stdout)  # the receipt as stored
    assert orjson.loads(first.stdout)["replayed"] is False
    assert orjson.loads(second.stdout)["replayed"] is True
    assert repo.commit_count() == 2
    text_first = apply(repo, PATCH)
    assert (
        stored_text(text_first.stdout)
        == "Success. Updated the following files:\nM src/app.py\nA tests/test_app.py\n"
    )
    assert repo.commit_count() == 2


@pytest.mark.parametrize(
    "spelling",
    [
        "apply_patch <<'EOF'\n" + PATCH + "EOF\n",
        PATCH.replace("\n", "\r\n"),
        PATCH.replace("*** Update File: src/app.py", "  *** Update File: ./src//app.py  "),
        PATCH.replace("*** Begin Patch", " *** Begin Patch ").rstrip("\n"),
    ],
    ids=["heredoc", "crlf", "padded-and-dot-slash", "padded-markers-no-final-newline"],
)
def test_equivalent_spelling_is_the_same_call(repo: Repo, spelling: str) -> None:
    first = apply(repo, PATCH, "--json")
    again = apply(repo, spelling, "--json")
    assert again.returncode == 0, again.stderr
    assert orjson.loads(again.stdout)["call_id"] == orjson.loads(first.stdout)["call_id"]
    assert stored_json(again.stdout) == stored_json(first.stdout)
    assert repo.commit_count() == 2


def test_new_attempt_is_a_new_call(repo: Repo) -> None:
    change = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
    )
    first = orjson.loads(apply(repo, change, "--json").stdout)
    # Someone puts the line back, so the same patch changes something again.
    (repo.path / "src/util.py").write_text("VALUE = 1\n")
    repo.git("commit", "-qam", "undo")
    second_run = apply(repo, change, "--json", "--attempt", "2")
    assert second_run.returncode == 0, second_run.stderr
    second = orjson.loads(second_run.stdout)
    assert second["call_id"] != first["call_id"]
    assert second["attempt"] == 2
    assert repo.call_ids() == [second["call_id"], first["call_id"]]


def test_contract_changes_the_call(repo: Repo, tmp_path: Path) -> None:
    contract = tmp_path / "contract.md"
    contract.write_text("do the thing\n")
    add = "*** Begin Patch\n*** Add File: notes.txt\n+note\n*** End Patch\n"
    one = orjson.loads(apply(repo, add, "--json").stdout)
    two = orjson.loads(apply(repo, add, "--json", "--contract", str(contract)).stdout)
    assert one["call_id"] != two["call_id"]
    import hashlib

    assert two["contract_sha256"] == hashlib.sha256(b"do the thing\n").hexdigest()


def test_absolute_path_inside_repo_is_normalised(repo: Repo) -> None:
    absolute = PATCH.replace("Update File: src/app.py", f"Update File: {repo.path}/src/app.py")
    first = orjson.loads(apply(repo, PATCH, "--json").stdout)
    again = apply(repo, absolute, "--json")
    assert orjson.loads(again.stdout)["call_id"] == first["call_id"]
    assert repo.commit_count() == 2


def test_tampered_receipt_is_never_trusted(repo: Repo) -> None:
    receipt = orjson.loads(apply(repo, PATCH, "--json").stdout)
    path = repo.state_dir() / "receipts" / f"{receipt['call_id']}.json"
    forged = dict(receipt)
    forged["files"] = [dict(f, sha256="0" * 64) for f in receipt["files"]]
    path.write_bytes(orjson.dumps(forged))
    result = apply(repo, PATCH, "--json")
    assert result.returncode == 5
    # No receipt to print: the error, as JSON (issue 12 item 9), and its line on stderr.
    assert orjson.loads(result.stdout)["error"]["kind"] == "receipt-invalid"
    assert result.stderr.startswith(f"error: receipt {receipt['call_id'][:12]} was changed")
    assert repo.commit_count() == 2


def test_known_call_replays_even_if_tree_changed_under_it(repo: Repo) -> None:
    patch = "*** Begin Patch\n*** Add File: d/x.txt\n+x\n*** End Patch\n"
    first = apply(repo, patch, "--json")
    repo.git("rm", "-q", "-r", "d")
    os.symlink(".", repo.path / "d")
    repo.git("add", "d")
    repo.git("commit", "-q", "-m", "d is a link now")
    again = apply(repo, patch, "--json")
    assert again.returncode == 0 and stored_json(again.stdout) == stored_json(first.stdout)
