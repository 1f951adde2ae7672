"""SEARCH/REPLACE blocks through the real CLI: one commit for several blocks and files, and
refusals that leave everything as it was (exit 1, one ``error:`` line, no commit, no file
changed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Repo, make_repo, run_cli

APP = "import os\r\n\r\n\r\ndef greet(name):\r\n    return 'hello ' + name\r\n\r\n\r\nVALUE = 1"


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return make_repo(
        tmp_path / "repo", {"src/app.py": APP, "README.md": "# demo\n\nx = 1\nx = 1\n"}
    )


def apply(repo: Repo, patch: str, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("apply", "-", "--repo", str(repo.path), *args, input=patch)


def assert_refused(repo: Repo, result, before: dict[str, bytes], head: str) -> str:  # type: ignore[no-untyped-def]
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("error: ")
    first, _, repair = result.stderr.partition("\n")
    assert not repair or repair.startswith("expected lines ("), result.stderr
    assert repo.head() == head
    assert repo.commit_count() == 1
    assert repo.files() == before
    return first[len("error: ") :]


PATCH = """I'll change greet and add a test.

src/app.py
```python
<<<<<<< SEARCH
def greet(name):
    return 'hello ' + name
=======
def greet(name):
    return f'hello {name}!'
>>>>>>> REPLACE
```

```python
<<<<<<< SEARCH
VALUE = 1
=======
VALUE = 2
>>>>>>> REPLACE
```

tests/test_app.py
```python
<<<<<<< SEARCH
=======
from src.app import greet
>>>>>>> REPLACE
```
"""


@pytest.mark.parametrize("format", ["auto", "search-replace"])
def test_blocks_on_several_files_are_one_commit_with_the_files_own_endings(
    repo: Repo, format: str
) -> None:
    result = apply(repo, PATCH, "--format", format)
    assert result.returncode == 0, result.stderr
    assert repo.commit_count() == 2
    files = repo.files()
    # CRLF kept, and the missing final newline too.
    assert (
        files["src/app.py"]
        == APP.replace("return 'hello ' + name", "return f'hello {name}!'")
        .replace("VALUE = 1", "VALUE = 2")
        .encode()
    )
    assert files["tests/test_app.py"] == b"from src.app import greet\n"
    # The same call again is a replay, not a second commit.
    again = apply(repo, PATCH)
    assert again.returncode == 0, again.stderr
    assert repo.commit_count() == 2


def test_a_search_found_twice_refuses_the_whole_call(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    patch = PATCH + "README.md\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n"
    message = assert_refused(repo, apply(repo, patch), before, head)
    assert message == (
        "README.md: block 1: the SEARCH lines match at 2 places (lines 3, 4; first SEARCH line: "
        "'x = 1'); copy more lines around the change into the SEARCH text, so it matches one "
        "place only"
    )


def test_a_search_not_found_refuses_with_the_nearest_lines(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    patch = PATCH.replace("    return 'hello ' + name\n=======", "    return 'hi ' + name\n=======")
    result = apply(repo, patch)
    message = assert_refused(repo, result, before, head)
    assert message.startswith(
        "src/app.py: block 1: the SEARCH lines are not in the file (first: 'def greet(name):')"
    )
    # The nearest region of the file is shown, numbered.
    assert " 4 | def greet(name):\n 5 |     return 'hello ' + name\n" in result.stderr


def test_an_empty_search_on_an_existing_file_is_refused(repo: Repo) -> None:
    before, head = repo.files(), repo.head()
    patch = PATCH.replace("tests/test_app.py", "README.md")
    message = assert_refused(repo, apply(repo, patch), before, head)
    assert message == (
        "cannot add README.md: it already exists; update the file instead: Codex '*** Update"
        " File: PATH' with hunks, a diff with '--- a/PATH' and '+++ b/PATH', or blocks whose"
        " SEARCH holds the lines to change"
    )


def test_an_unknown_format_names_search_replace(repo: Repo) -> None:
    result = apply(repo, PATCH, "--format", "aider")
    assert result.returncode == 2
    assert "search-replace" in result.stderr
