"""One error style on the command line: every error line starts 'error:' and is one line; every
JSON error (a receipt's, or the document of a failure without one) carries 'retryable' (a bool);
nothing is written."""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import UTIL_PATCH, Repo, apply, run_cli

STALE = UTIL_PATCH.replace("VALUE = 1", "VALUE = 7")


def _dirty(repo: Repo) -> None:
    (repo.path / "src/util.py").write_text("VALUE = 9\n")


CASES = {
    # name: (patch, extra args, set-up, kind, exit code, retryable)
    "garbage": ("not a patch\n", (), None, None, 2, False),
    "hunk-mismatch": (STALE, (), None, "hunk-mismatch", 1, False),
    "dirty-path": (UTIL_PATCH, (), _dirty, "dirty-path", 4, True),
    "no-branch": (UTIL_PATCH, ("--branch", "nope"), None, "usage", 2, False),
    "bad-attempt": (UTIL_PATCH, ("--attempt", "0"), None, "usage", 2, False),
    "bad-option": (UTIL_PATCH, ("--bogus",), None, "usage", 2, False),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_cli_error_is_one_error_line_and_its_json_says_retryable(
    repo: Repo, name: str
) -> None:
    patch, extra, setup, kind, code, retryable = CASES[name]
    if setup is not None:
        setup(repo)
    head, files = repo.head(), repo.files()
    plain = apply(repo, patch, *extra)
    as_json = apply(repo, patch, *extra, "--json")
    assert plain.returncode == as_json.returncode == code, (plain, as_json)
    assert repo.head() == head and repo.files() == files  # nothing written
    assert "Traceback" not in plain.stderr + as_json.stderr
    # typer's own usage errors (bad-option, bad-attempt) too: one line, not its usage block.
    first = plain.stderr.splitlines()[0]
    assert first.startswith("error: ") and "; " in first, plain.stderr
    if name in ("bad-option", "bad-attempt"):
        assert plain.stderr.count("\n") == 1 and "see 'applyonce apply --help'" in first
    document = orjson.loads(as_json.stdout)
    error = document["error"]
    assert isinstance(error["retryable"], bool) and error["retryable"] is retryable, error
    if kind is not None:
        assert error["kind"] == kind
    assert error["message"] and "hint" in error


def test_a_show_of_an_unknown_call_is_one_error_line_and_says_retryable(repo: Repo) -> None:
    plain = run_cli("show", "abcdef", "--repo", str(repo.path))
    as_json = run_cli("show", "abcdef", "--repo", str(repo.path), "--json")
    assert plain.returncode == as_json.returncode == 2
    assert plain.stderr.startswith("error: no call 'abcdef'") and plain.stderr.count("\n") == 1
    assert orjson.loads(as_json.stdout)["error"]["retryable"] is False
