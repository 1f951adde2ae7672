"""The built-in checks through the real CLI: what they reject, what they let through, and
``--skip-check``. Every refusal also shows that nothing was written."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from applyonce.core.checks import conflict_markers
from applyonce.errors import UsageError
from applyonce.executor import CallOptions, Executor
from tests.conftest import Repo, make_repo, run_cli, stored_json

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

CONFLICT_BLOCK = (
    "*** Begin Patch\n*** Update File: README.md\n@@\n # demo\n"
    "+<<<<<<< ours\n+a\n+=======\n+b\n+>>>>>>> theirs\n*** End Patch\n"
)
PYTHON_2 = '*** Begin Patch\n*** Add File: legacy.py\n+print "hello"\n*** End Patch\n'


def apply(repo: Repo, patch: str, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("apply", "-", "--repo", str(repo.path), "--json", *args, input=patch)


def receipt_of(repo: Repo, call_id: str) -> dict:  # type: ignore[type-arg]
    return orjson.loads((repo.state_dir() / "receipts" / f"{call_id}.json").read_bytes())


def only_receipt(repo: Repo) -> dict:  # type: ignore[type-arg]
    [path] = (repo.state_dir() / "receipts").glob("*.json")
    return orjson.loads(path.read_bytes())


def checks_of(receipt: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {c["name"]: c for c in receipt["checks"]}


def assert_nothing_committed(repo: Repo, head: str, files: dict[str, bytes]) -> None:
    assert repo.head() == head
    assert repo.files() == files
    assert repo.git("status", "--porcelain") == ""


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("docs/install.rst", "Install\n=======\n\nRun it.\n"),
        ("docs/notes.md", "Heading\n=======\n\nText.\n"),
        ("docs/both.rst", "=======\nInstall\n=======\n\nSee `>>>>>>>` in the docs.\n"),
    ],
    ids=["rst-underline", "markdown-setext", "rst-overline"],
)
def test_a_heading_underline_is_not_a_conflict_marker(repo: Repo, path: str, text: str) -> None:
    lines = "".join(f"+{line}\n" for line in text.splitlines())
    result = apply(repo, f"*** Begin Patch\n*** Add File: {path}\n{lines}*** End Patch\n")
    assert result.returncode == 0, result.stderr
    assert checks_of(orjson.loads(result.stdout))["builtin:conflict-markers"]["exit_code"] == 0
    assert (repo.path / path).read_text() == text


def test_a_heading_after_an_unclosed_marker_line_is_not_counted(repo: Repo) -> None:
    # The README already holds a lone '<<<<<<<' (say, documentation quoting it): a heading added
    # below it is not inside a conflict block, since no '>>>>>>>' closes one.
    repo.path.joinpath("README.md").write_text("# demo\n<<<<<<< is a marker\n")
    repo.git("commit", "-qam", "quote a marker")
    patch = "*** Begin Patch\n*** Update File: README.md\n@@\n <<<<<<< is a marker\n+Usage\n+=======\n*** End Patch\n"
    assert apply(repo, patch).returncode == 0


def test_an_added_conflict_block_is_rejected_and_nothing_is_committed(repo: Repo) -> None:
    head, files = repo.head(), repo.files()
    result = apply(repo, CONFLICT_BLOCK)
    assert result.returncode == 1
    receipt = orjson.loads(result.stdout)
    assert receipt["status"] == "rejected" and receipt["commit"] is None
    assert receipt["error"]["kind"] == "check-failed"
    assert receipt["error"]["check"] == "builtin:conflict-markers"
    marker_check = checks_of(receipt)["builtin:conflict-markers"]
    assert marker_check["exit_code"] == 1
    assert marker_check["output_tail"] == "README.md: adds merge-conflict markers"
    assert "README.md: adds merge-conflict markers" in receipt["output"]
    assert_nothing_committed(repo, head, files)


@pytest.mark.parametrize("line", ["<<<<<<< HEAD", ">>>>>>> feature", "<<<<<<<", ">>>>>>>"])
def test_a_lone_marker_line_added_is_rejected(repo: Repo, line: str) -> None:
    head, files = repo.head(), repo.files()
    patch = f"*** Begin Patch\n*** Update File: README.md\n@@\n # demo\n+{line}\n*** End Patch\n"
    result = apply(repo, patch)
    assert result.returncode == 1
    assert orjson.loads(result.stdout)["error"]["check"] == "builtin:conflict-markers"
    assert_nothing_committed(repo, head, files)


def test_resolving_one_block_while_adding_another_is_rejected(tmp_path: Path) -> None:
    # Regression: the check compared totals, so removing three marker lines and adding three
    # new ones passed.
    repo = make_repo(
        tmp_path / "r", {"f.txt": "top\n<<<<<<< HEAD\nours\n=======\ntheirs\n>>>>>>> br\nend\n"}
    )
    head, files = repo.head(), repo.files()
    patch = (
        "*** Begin Patch\n*** Update File: f.txt\n@@\n top\n-<<<<<<< HEAD\n-ours\n-=======\n"
        "-theirs\n->>>>>>> br\n+ours\n+<<<<<<< HEAD\n+new\n+=======\n+other\n+>>>>>>> other\n"
        " end\n*** End Patch\n"
    )
    result = apply(repo, patch)
    assert result.returncode == 1
    assert orjson.loads(result.stdout)["error"]["check"] == "builtin:conflict-markers"
    assert_nothing_committed(repo, head, files)
    # Resolving the block alone is fine.
    resolve = "*** Begin Patch\n*** Update File: f.txt\n@@\n top\n-<<<<<<< HEAD\n ours\n-=======\n-theirs\n->>>>>>> br\n end\n*** End Patch\n"
    assert apply(repo, resolve).returncode == 0


def test_markers_are_counted_inside_blocks_only() -> None:
    assert conflict_markers(b"Title\n=======\n") == 0
    assert conflict_markers(b"<<<<<<< a\nx\n=======\ny\n>>>>>>> b\n") == 3
    assert conflict_markers(b"<<<<<<< a\r\nx\r\n=======\r\ny\r\n>>>>>>> b\r\n") == 3  # CRLF
    assert conflict_markers(b"=======\n<<<<<<< a\n=======\n") == 1  # never closed
    assert conflict_markers(b">>>>>>> b\n=======\n") == 1
    assert conflict_markers(b"<<<<<<<<\n>>>>>>>>x\n") == 0  # not 7 characters


def test_skip_check_markers_lets_a_conflict_block_through(repo: Repo) -> None:
    result = apply(repo, CONFLICT_BLOCK, "--skip-check", "markers")
    assert result.returncode == 0, result.stderr
    receipt = orjson.loads(result.stdout)
    assert receipt["status"] == "committed" and receipt["commit"] == repo.head()
    checks = checks_of(receipt)
    assert checks["builtin:conflict-markers"] == {
        "name": "builtin:conflict-markers",
        "exit_code": 0,
        "duration_ms": 0,
        "output_tail": "skipped (--skip-check markers)",
    }
    assert checks["builtin:syntax"]["output_tail"] == ""  # it ran
    assert "=======\nb\n>>>>>>> theirs\n" in (repo.path / "README.md").read_text()
    assert repo.git("status", "--porcelain") == ""
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0


def test_skip_check_syntax_lets_python_2_through(repo: Repo) -> None:
    result = apply(repo, PYTHON_2, "--skip-check", "syntax")
    assert result.returncode == 0, result.stderr
    receipt = orjson.loads(result.stdout)
    assert checks_of(receipt)["builtin:syntax"]["output_tail"] == "skipped (--skip-check syntax)"
    assert checks_of(receipt)["builtin:conflict-markers"]["output_tail"] == ""
    assert (repo.path / "legacy.py").read_text() == 'print "hello"\n'
    assert repo.git("status", "--porcelain") == ""
    # Repeated flags are one skip.
    again = apply(repo, PYTHON_2, "--skip-check", "syntax", "--skip-check", "syntax")
    assert stored_json(again.stdout) == stored_json(result.stdout)


def test_skip_check_is_not_part_of_the_calls_identity(repo: Repo) -> None:
    # Like --check, --skip-check is how a call is run, not what it is (docs/design.md §3): a rejected
    # call repeated with the skip replays its rejection; a new attempt runs.
    head, files = repo.head(), repo.files()
    first = apply(repo, PYTHON_2)
    assert first.returncode == 1
    rejected = orjson.loads(first.stdout)
    assert rejected["error"]["check"] == "builtin:syntax"
    assert "--skip-check syntax" in rejected["error"]["hint"]
    assert_nothing_committed(repo, head, files)
    repeat = apply(repo, PYTHON_2, "--skip-check", "syntax")
    assert repeat.returncode == 1 and stored_json(repeat.stdout) == stored_json(first.stdout)
    assert_nothing_committed(repo, head, files)
    second = apply(repo, PYTHON_2, "--skip-check", "syntax", "--attempt", "2")
    assert second.returncode == 0, second.stderr
    assert orjson.loads(second.stdout)["call_id"] != rejected["call_id"]
    assert (repo.path / "legacy.py").exists()


@pytest.mark.parametrize("extra", [[], ["--dry-run"]], ids=["apply", "dry-run"])
def test_unknown_skip_check_name_is_a_usage_error(repo: Repo, extra: list[str]) -> None:
    head, files = repo.head(), repo.files()
    result = apply(repo, PYTHON_2, "--skip-check", "lint", *extra)
    assert result.returncode == 2
    # apply() passes --json: the error is printed as JSON too (issue 12 item 9).
    assert orjson.loads(result.stdout) == {
        "schema_version": 1,
        "exit_code": 2,
        "error": {
            "kind": "usage",
            "message": "unknown --skip-check 'lint'",
            "hint": "the built-in checks are syntax and markers",
            "retryable": False,
        },
    }
    assert result.stderr == (
        "error: unknown --skip-check 'lint'; the built-in checks are syntax and markers\n"
    )
    assert_nothing_committed(repo, head, files)
    assert not repo.state_dir().exists()


def test_python_api_takes_skip_checks(repo: Repo) -> None:
    executor = Executor(repo.path)
    receipt = executor.apply(PYTHON_2, skip_checks=["syntax"])
    executor.close()
    assert receipt.status == "committed"
    assert [c.output_tail for c in receipt.checks if c.name == "builtin:syntax"] == [
        "skipped (--skip-check syntax)"
    ]
    with pytest.raises(UsageError, match="unknown --skip-check 'conflicts'"):
        CallOptions(skip_checks=["conflicts"])
    assert CallOptions(skip_checks="markers").skip_checks == ("markers",)
