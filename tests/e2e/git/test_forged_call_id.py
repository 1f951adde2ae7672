"""A foreign commit never stands in for a call: a commit found by its Call-Id is adopted only when
it carries the call's change. A user's real ``git commit`` whose message copies a call's trailer
block makes the call unknown (exit 5), never "Success", and audit names the commit as forged."""

from __future__ import annotations

import signal
from pathlib import Path

import orjson
import pytest

from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo, run_cli
from tests.support.forged import genuine_fields, trailer_block

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

REASON = "a commit carries this Call-Id but not its change"


def _apply(repo: Repo, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=PATCH, env=env)


def _user_commit(repo: Repo, trailers: str, files: dict[str, str]) -> str:
    """The user's own change, committed with the real git, its message ending in ``trailers``."""
    for path, text in files.items():
        (repo.path / path).write_text(text)
        repo.git("add", path)
    message = repo.path.parent / "message.txt"
    message.write_text(f"my own change\n\nNothing to do with the agent.\n\n{trailers}")
    repo.git("commit", "-q", "-F", str(message))
    return repo.head()


def _crash(repo: Repo, point: str) -> dict[str, object]:
    """Kill a call at ``point``; the fields of its prepared receipt, if it wrote one."""
    assert _apply(repo, env={"APPLYONCE_FAULT": point}).returncode == -signal.SIGKILL
    receipts = list((repo.state_dir() / "receipts").glob("*.json"))
    return dict(orjson.loads(receipts[0].read_bytes())) if receipts else {}


def _assert_forged_everywhere(repo: Repo, forged: str, call_id: str) -> None:
    """apply exits 5 and never says Success; audit names the commit as forged."""
    again = _apply(repo)
    assert again.returncode == 5, again.stderr
    assert "Success" not in again.stdout + again.stderr
    assert (
        f"outcome is unknown: {REASON} (commit {forged[:12]}); the patch did not run"
        in again.stderr
    )
    assert (repo.path / "src/util.py").read_text() == "VALUE = 99\n"  # the patch never ran
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 1
    lines = [line for line in audit.stdout.splitlines() if line.startswith("forged")]
    assert lines == [
        f"forged       {call_id[:12]}  commit {forged[:12]} carries this Call-Id but not its "
        f"change; the patch never ran; do not count the patch as applied: settle the call with "
        f"'applyonce resolve {call_id[:12]} --as rejected --note TEXT' and send the change "
        "again as a new attempt if it is still wanted"
    ]


def test_recover_and_apply_refuse_a_commit_with_the_calls_trailers_but_another_change(
    repo: Repo,
) -> None:
    fields = _crash(repo, "after-prepared")
    forged = _user_commit(repo, trailer_block(fields), {"src/util.py": "VALUE = 99\n"})
    assert repo.call_ids() == [fields["call_id"]]
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 5
    assert f"{REASON} (commit {forged[:12]}); the patch did not run" in recovered.stdout
    _assert_forged_everywhere(repo, forged, str(fields["call_id"]))
    shown = orjson.loads(
        run_cli("show", str(fields["call_id"]), "--repo", str(repo.path), "--json").stdout
    )
    assert shown["status"] == "unknown"
    assert shown["error"]["kind"] == "forged-call-id" and shown["error"]["commits"] == [forged]
    # A person settles it; the same call then replays that decision, and a new attempt runs.
    settled = run_cli(
        "resolve",
        str(fields["call_id"])[:12],
        "--as",
        "rejected",
        "--note",
        "commit was not the agent's",
        "--repo",
        str(repo.path),
    )
    assert settled.returncode == 0, settled.stderr
    replayed = _apply(repo)
    assert replayed.returncode == 1 and "Success" not in replayed.stdout
    assert _apply(repo, "--attempt", "2").returncode == 1  # VALUE = 1 is gone: a real rejection
    assert repo.head() == forged


def test_a_forged_commit_with_a_wrong_args_digest_is_not_the_call(repo: Repo) -> None:
    fields = _crash(repo, "after-prepared")
    trailers = trailer_block(fields, args_sha256="0" * 64)
    forged = _user_commit(repo, trailers, {"src/util.py": "VALUE = 99\n"})
    # No recover first: the repeated apply takes the dead claim over and asks Git.
    _assert_forged_everywhere(repo, forged, str(fields["call_id"]))


def test_a_call_killed_after_its_claim_is_not_taken_from_a_foreign_commit(
    repo: Repo, tmp_path: Path
) -> None:
    assert _crash(repo, "after-claim") == {}  # no receipt yet: only the claim's record
    genuine = genuine_fields(repo)
    forged = _user_commit(repo, trailer_block(genuine), {"src/util.py": "VALUE = 99\n"})
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 5 and REASON in recovered.stdout
    _assert_forged_everywhere(repo, forged, str(genuine["call_id"]))


def test_a_call_never_run_in_this_clone_is_not_taken_from_a_foreign_commit(
    repo: Repo, tmp_path: Path
) -> None:
    genuine = genuine_fields(repo)
    forged = _user_commit(repo, trailer_block(genuine), {"src/util.py": "VALUE = 99\n"})
    assert not repo.state_dir().exists()
    _assert_forged_everywhere(repo, forged, str(genuine["call_id"]))


def test_a_lost_state_dir_rebuilt_from_a_foreign_commit_is_caught_by_the_next_apply(
    repo: Repo, tmp_path: Path
) -> None:
    genuine = genuine_fields(repo)
    forged = _user_commit(repo, trailer_block(genuine), {"src/util.py": "VALUE = 99\n"})
    # With no record of the call's args anywhere, recover can only rebuild the record from the
    # commit; the next apply of the call has its args, checks the commit and refuses it.
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    _assert_forged_everywhere(repo, forged, str(genuine["call_id"]))


def test_a_commit_with_the_calls_change_and_more_is_not_the_call(repo: Repo) -> None:
    fields = _crash(repo, "after-prepared")
    forged = _user_commit(
        repo, trailer_block(fields), {"src/util.py": "VALUE = 2\n", "src/app.py": "import os\n"}
    )
    # Audit needs no recover first: the ledger has the call's args.
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 1
    assert f"forged       {str(fields['call_id'])[:12]}  commit {forged[:12]}" in audit.stdout
    assert "run 'applyonce recover' to record the call as unknown" in audit.stdout
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 5
    assert f"{REASON} (commit {forged[:12]})" in recovered.stdout


def test_the_genuine_commit_of_a_crashed_call_is_still_adopted(repo: Repo) -> None:
    assert _apply(repo, env={"APPLYONCE_FAULT": "after-publish"}).returncode == -signal.SIGKILL
    commit = repo.head()
    again = _apply(repo, "--json")
    assert again.returncode == 0, again.stderr
    receipt = orjson.loads(again.stdout)
    assert receipt["reconciled"] is True and receipt["commit"] == commit
    assert receipt["output"] == "Success. Updated the following files:\nM src/util.py\n"
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0


def test_a_foreign_commit_that_lands_while_the_call_runs_is_not_the_call(
    repo: Repo, tmp_path: Path
) -> None:
    """The tip moves under the call (its check makes the user's commit, with the call's copied
    trailers, in the real git): the publish fails, and the commit found is not adopted."""
    genuine = genuine_fields(repo)
    message = tmp_path / "forged-message.txt"
    message.write_text(f"my own change\n\n{trailer_block(genuine)}")
    (tmp_path / "forge.sh").write_text(
        f"cd '{repo.path}' && echo 'VALUE = 99' > src/util.py && git commit -q -a -F '{message}'\n"
    )
    result = _apply(repo, "--check", f"sh {tmp_path / 'forge.sh'}")
    assert result.returncode == 5, result.stderr
    assert "Success" not in result.stdout + result.stderr
    assert f"outcome is unknown: {REASON} (commit {repo.head()[:12]})" in result.stderr
    assert repo.call_ids() == [genuine["call_id"]]  # the patch was not published as well
    shown = run_cli("show", str(genuine["call_id"]), "--repo", str(repo.path), "--json")
    assert orjson.loads(shown.stdout)["status"] == "unknown"  # for a person, not a rejection
