"""``applyonce resolve CALL_ID --as rewritten --note TEXT``: a committed call whose commit a reset
or squash removed by hand is recorded so, and audit lists it instead of failing forever."""

from __future__ import annotations

import orjson
from typer.testing import CliRunner

from applyonce.adapters.cli import app
from applyonce.executor import Executor
from tests.conftest import UTIL_PATCH, Repo, Run
from tests.support.records import record_of


def cli(repo: Repo, *args: str, input: str | None = None) -> Run:
    result = CliRunner().invoke(app, [*args, "--repo", str(repo.path)], input=input)
    return Run(result.exit_code, result.stdout, result.stderr)


def committed_call(repo: Repo) -> str:
    applied = cli(repo, "apply", "-", "--json", input=UTIL_PATCH)
    assert applied.returncode == 0, applied.stderr
    return str(orjson.loads(applied.stdout)["call_id"])


def test_resolve_as_rewritten_after_a_reset_makes_audit_clean(repo: Repo) -> None:
    call_id = committed_call(repo)
    repo.git("reset", "-q", "--hard", "HEAD~1")
    before = cli(repo, "audit")
    assert before.returncode == 1 and before.stdout.startswith(f"unreachable  {call_id[:12]}")

    note = "squashed into the release commit"
    resolved = cli(repo, "resolve", call_id[:10], "--as", "rewritten", "--note", note)
    assert resolved.returncode == 0, resolved.stderr
    assert resolved.stdout.startswith(f"call {call_id[:12]} resolved as rewritten")

    audit = cli(repo, "audit")
    assert audit.returncode == 0
    assert audit.stdout.splitlines() == [
        f"rewritten    {call_id[:12]}  resolved by hand: {note}",
        "audited 0 Call-Id commit(s) on refs/heads/main and 1 receipt(s): clean",
    ]
    report = orjson.loads(cli(repo, "audit", "--json").stdout)
    assert report["clean"] is True and report["problems"] == []
    assert [r["call_id"] for r in report["rewritten"]] == [call_id]
    assert report["rewritten"][0]["note"] == note
    # The receipt stays committed and valid, and replay agrees with the record.
    shown = orjson.loads(cli(repo, "show", call_id, "--json").stdout)
    assert shown["status"] == "committed"
    assert cli(repo, "replay").returncode == 0
    executor = Executor(repo.path)
    try:
        [event] = [e for e in executor.ledger.events(call_id) if e.kind == "resolved"]
    finally:
        executor.close()
    assert event.data == {"as": "rewritten", "note": note, "commit": shown["commit"], "set": {}}


def test_resolve_as_rewritten_refused_while_the_commit_is_on_the_branch(repo: Repo) -> None:
    call_id = committed_call(repo)
    record = record_of(repo)
    refused = cli(repo, "resolve", call_id, "--as", "rewritten", "--note", "reset")
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        f"error: call {call_id[:12]}'s commit {repo.head()[:12]} is still on refs/heads/main; "
        "nothing was rewritten; "
    )
    assert refused.stderr.count("\n") == 1
    assert record_of(repo) == record  # nothing written: no event, no receipt


def test_an_amend_that_drops_the_trailers_is_unreachable_and_the_hint_makes_audit_clean(
    repo: Repo,
) -> None:
    """The call's commit amended with a message of the user's own: no commit carries the
    Call-Id any more. Audit said to re-apply the call as a new attempt (its change is on the
    branch already: that would apply it twice) and never named what records the rewrite."""
    call_id = committed_call(repo)
    own = repo.head()
    repo.git("commit", "-q", "--amend", "-m", "my own words")
    audited = cli(repo, "audit")
    assert audited.returncode == 1
    assert audited.stdout.splitlines()[0] == (
        f"unreachable  {call_id[:12]}  receipt's commit {own[:12]} is not on refs/heads/main "
        "(the branch was reset or rewritten); if that was done on purpose, record it with "
        f"'applyonce resolve {call_id[:12]} --as rewritten --note TEXT' (and send the change "
        "again as a new attempt if it is still wanted)"
    )
    resolved = cli(repo, "resolve", call_id[:12], "--as", "rewritten", "--note", "amended")
    assert resolved.returncode == 0, resolved.stderr
    clean = cli(repo, "audit")
    assert clean.returncode == 0, clean.stdout
    assert clean.stdout.splitlines()[0] == f"rewritten    {call_id[:12]}  resolved by hand: amended"
