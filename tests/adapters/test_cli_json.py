"""``--json`` on every command and every failure (issue 12, item 9).

A failure raised before a receipt exists (a usage error, typer's own parse errors, a conflict, an
unreadable patch, a path that is not a repository, state that does not verify, an internal error)
prints ONE JSON object on stdout, ``{"schema_version", "exit_code", "error": {kind, message,
hint}}``, keeps its one line on stderr, and exits with that code; every other JSON document
carries a schema version; ``schema --for receipt`` describes the receipts real calls write.
"""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

import jsonschema
import orjson
import pytest
from typer.testing import CliRunner

from applyonce.adapters.cli import app
from applyonce.adapters.cli.app import import_commands
from tests.conftest import UTIL_PATCH, Repo, Run, run_cli

MISMATCH = UTIL_PATCH.replace("-VALUE = 1", "-VALUE = 7")
ADD = "*** Begin Patch\n*** Add File: added.txt\n+added\n*** End Patch\n"
# Every command that takes --json, as the app registers them: one added later gets the same test.
import_commands()
JSON_COMMANDS = sorted(
    (c.name or c.callback.__name__)  # type: ignore[union-attr]
    for c in app.registered_commands
    if "json" in c.callback.__code__.co_varnames  # type: ignore[union-attr]
)
# Arguments a command needs before its --repo is even looked at.
REQUIRED_ARGS = {
    "show": ["abcdef0123"],
    "revert": ["abcdef0123"],
    "land": ["--all"],
    "resolve": ["abcdef0123", "--as", "rejected", "--note", "x"],
}


def invoke(*args: str, input: str | None = None) -> Run:
    """The CLI in this process (fast); ``run_cli`` where a real process matters."""
    result = CliRunner().invoke(app, list(args), input=input)
    return Run(result.exit_code, result.stdout, result.stderr)


def _error_document(run: Run, exit_code: int, kind: str) -> dict[str, object]:
    """The one JSON object on stdout, checked against the exit code and the kind."""
    assert run.returncode == exit_code, run.stderr
    document = orjson.loads(run.stdout)  # one document, nothing else on stdout
    assert set(document) == {"schema_version", "exit_code", "error"}
    assert document["schema_version"] == 1 and document["exit_code"] == exit_code
    error = document["error"]
    assert isinstance(error, dict) and error["kind"] == kind
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["hint"], str)
    return error


def test_every_command_with_json_is_covered() -> None:
    assert set(JSON_COMMANDS) >= {"apply", "show", "log", "recover", "replay", "audit", "resolve"}


@pytest.mark.parametrize("command", JSON_COMMANDS)
def test_json_error_outside_a_repository_on_every_command(tmp_path: Path, command: str) -> None:
    nowhere = tmp_path / "not-a-repo"
    nowhere.mkdir()
    result = invoke(
        command, *REQUIRED_ARGS.get(command, []), "--repo", str(nowhere), "--json", input=ADD
    )
    error = _error_document(result, 2, "not-a-repository")
    assert result.stderr == f"error: {error['message']}; {error['hint']}\n"
    assert list(nowhere.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        (["show", "abcdef0123"], "usage"),  # no such call
        (["apply", "no-such.patch"], "usage"),  # unreadable patch
        (["resolve", "abcdef0123"], "usage"),  # our own usage error: --as and --note missing
        (["apply", "-", "--attempt", "abc"], "usage"),  # typer's: a bad option value
        (["apply", "-", "--bogus"], "usage"),  # typer's: no such option
    ],
)
def test_json_usage_errors_print_one_object(repo: Repo, args: list[str], kind: str) -> None:
    before = repo.commit_count()
    result = invoke(*args, "--json", "--repo", str(repo.path), input=ADD)
    error = _error_document(result, 2, kind)
    assert result.stderr.strip(), "the human-readable message stays on stderr"
    if "--attempt" in args or "--bogus" in args:
        assert "applyonce apply --help" in str(error["hint"])
    assert repo.commit_count() == before and not repo.state_dir().exists()


def test_without_json_an_error_prints_nothing_on_stdout(repo: Repo) -> None:
    for args in (["show", "abcdef0123"], ["apply", "-", "--attempt", "abc"]):
        result = invoke(*args, "--repo", str(repo.path), input=ADD)
        assert result.returncode == 2 and result.stdout == ""


def test_json_parse_error_in_a_real_process(repo: Repo) -> None:
    """typer's own parse error, in the installed entry point's process: JSON on stdout, one
    ``error:`` line on stderr, exit 2."""
    result = run_cli("apply", "-", "--json", "--attempt", "0", "--repo", str(repo.path), input=ADD)
    error = _error_document(result, 2, "usage")
    assert "--attempt" in str(error["message"]) and error["hint"] == "see 'applyonce apply --help'"
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "see 'applyonce apply --help'" in result.stderr
    assert not repo.state_dir().exists()


def test_a_json_value_of_another_option_is_not_json(repo: Repo) -> None:
    """``--note --json`` is a note whose text is "--json": parsed, not guessed."""
    result = invoke(
        "resolve", "abcdef0123", "--as", "rejected", "--note", "--json", "--repo", str(repo.path)
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("error: no call 'abcdef0123'")


def test_json_conflict_a_reused_key(repo: Repo) -> None:
    first = invoke("apply", "-", "--idempotency-key", "k1", "--repo", str(repo.path), input=ADD)
    assert first.returncode == 0, first.stderr
    head = repo.head()
    reused = invoke(
        "apply",
        "-",
        "--idempotency-key",
        "k1",
        "--json",
        "--repo",
        str(repo.path),
        input=UTIL_PATCH,
    )
    error = _error_document(reused, 4, "idempotency-key-reused")
    assert reused.stderr == f"error: {error['message']}; {error['hint']}\n"
    assert repo.head() == head


def test_json_state_error_a_receipt_that_does_not_verify(repo: Repo) -> None:
    committed = invoke("apply", "-", "--json", "--repo", str(repo.path), input=ADD)
    call_id = orjson.loads(committed.stdout)["call_id"]
    path = repo.state_dir() / "receipts" / f"{call_id}.json"
    path.write_bytes(path.read_bytes().replace(b"added.txt", b"other.txt"))
    shown = invoke("show", call_id, "--json", "--repo", str(repo.path))
    _error_document(shown, 5, "receipt-invalid")


def test_json_internal_error_names_its_log(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An internal error is a bug, so no real input makes one: a bug is planted in audit."""

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("planted bug")

    monkeypatch.setattr("applyonce.executor.Executor.audit", broken)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    result = CliRunner().invoke(app, ["audit", "--json", "--repo", str(repo.path)])
    assert result.exit_code == 3
    document = orjson.loads(result.stdout)
    assert document["exit_code"] == 3 and document["error"]["kind"] == "internal"
    log = Path(document["error"]["log"])
    assert log.parent == tmp_path and "planted bug" in log.read_text()
    assert "RuntimeError: planted bug" in document["error"]["message"]


def test_every_json_report_has_a_schema_version(repo: Repo) -> None:
    assert invoke("apply", "-", "--repo", str(repo.path), input=ADD).returncode == 0
    for args in (["recover"], ["audit"], ["replay"], ["apply", "-", "--dry-run"]):
        result = invoke(*args, "--json", "--repo", str(repo.path), input=UTIL_PATCH)
        assert result.returncode == 0, result.stderr
        assert orjson.loads(result.stdout)["schema_version"] == 1, args
    # log --json stays a list (scripts iterate it); each row carries the version.
    rows = orjson.loads(invoke("log", "--json", "--repo", str(repo.path)).stdout)
    assert isinstance(rows, list) and [row["schema_version"] for row in rows] == [1]
    # The receipt keeps its own "schema" and no other key: its bytes are a contract.
    shown = orjson.loads(
        invoke("show", rows[0]["call_id"], "--json", "--repo", str(repo.path)).stdout
    )
    assert shown["schema"] == 1 and "schema_version" not in shown


def test_release_json_has_a_schema_version(repo: Repo) -> None:
    other_host = {"APPLYONCE_HOST_ID": "build-host-2.example.invalid"}
    killed = run_cli(
        "apply",
        "-",
        "--repo",
        str(repo.path),
        input=ADD,
        env={"APPLYONCE_FAULT": "after-claim", **other_host},
    )
    assert killed.returncode == -signal.SIGKILL
    [row] = orjson.loads(invoke("log", "--json", "--repo", str(repo.path)).stdout)
    released = invoke("resolve", row["call_id"], "--release", "--json", "--repo", str(repo.path))
    assert released.returncode == 0, released.stderr
    assert orjson.loads(released.stdout)["schema_version"] == 1


def test_receipt_schema_validates_real_receipts(repo: Repo) -> None:
    printed = invoke("schema", "--for", "receipt")
    assert printed.returncode == 0, printed.stderr
    schema = orjson.loads(printed.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    receipts = []
    committed = invoke("apply", "-", "--json", "--repo", str(repo.path), input=UTIL_PATCH)
    rejected = invoke("apply", "-", "--json", "--repo", str(repo.path), input=MISMATCH)
    assert (committed.returncode, rejected.returncode) == (0, 1)
    # 'apply --json' is the receipt's fields, then whether the call was a replay.
    printed_calls = [orjson.loads(committed.stdout), orjson.loads(rejected.stdout)]
    assert [p.pop("replayed") for p in printed_calls] == [False, False]
    receipts += printed_calls
    # An unknown outcome, settled by a person: the commit landed, then history was rewritten.
    crashed = run_cli(
        "apply", "-", "--repo", str(repo.path), input=ADD, env={"APPLYONCE_FAULT": "after-publish"}
    )
    assert crashed.returncode == -signal.SIGKILL
    commit = repo.head()
    (repo.path / ".git" / "index.lock").unlink()  # the killed call's, removed by hand
    repo.git("reset", "-q", "--hard")
    repo.git("revert", "--no-edit", "HEAD")
    repo.git("cherry-pick", commit)
    assert invoke("recover", "--repo", str(repo.path)).returncode == 5
    call_id = repo.call_ids()[0]
    resolved = invoke(
        "resolve",
        call_id,
        "--as",
        "committed",
        "--commit",
        commit,
        "--note",
        "the first one counts",
        "--json",
        "--repo",
        str(repo.path),
    )
    assert resolved.returncode == 0, resolved.stderr
    receipts.append(orjson.loads(resolved.stdout))
    assert [r["status"] for r in receipts] == ["committed", "rejected", "committed"]
    assert receipts[2]["note"] == "the first one counts"
    # What is stored is what is printed: every receipt file validates too.
    stored = [orjson.loads(p.read_bytes()) for p in (repo.state_dir() / "receipts").glob("*.json")]
    assert len(stored) == 3
    for receipt in receipts + stored:
        validator.validate(receipt)
    # And the schema is not vacuous: a receipt with a field renamed or a bad status fails.
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**receipts[0], "status": "done"})
    renamed = dict(receipts[0])
    renamed["commit_id"] = renamed.pop("commit")
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(renamed)


def test_schema_for_receipt_refuses_openai_options() -> None:
    result = invoke("schema", "--for", "receipt", "--api", "chat")
    assert result.returncode == 2 and "for --for openai only" in result.stderr
