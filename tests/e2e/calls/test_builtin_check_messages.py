"""What the built-in checks say on stderr when they reject a patch: broken Python, conflict
markers, bad JSON, a move onto a JSON file. (``test_builtin_checks_cli.py`` reads the receipts.)"""

from __future__ import annotations

from tests.conftest import Repo, apply


def test_builtin_syntax_check_rejects_broken_python(repo: Repo) -> None:
    head = repo.head()
    patch = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = (1\n*** End Patch\n"
    result = apply(repo, patch)
    assert result.returncode == 1
    assert "builtin:syntax" in result.stderr and "src/util.py:1" in result.stderr
    assert repo.head() == head


def test_builtin_check_rejects_conflict_markers_and_bad_json(repo: Repo) -> None:
    markers = (
        "*** Begin Patch\n*** Update File: README.md\n@@\n # demo\n+<<<<<<< HEAD\n+a\n+=======\n"
        "+b\n+>>>>>>> other\n*** End Patch\n"
    )
    result = apply(repo, markers)
    assert result.returncode == 1 and "conflict" in result.stderr
    bad_json = '*** Begin Patch\n*** Add File: data.json\n+{"a": 1,}\n*** End Patch\n'
    result = apply(repo, bad_json)
    assert result.returncode == 1 and "data.json" in result.stderr
    assert repo.commit_count() == 1


def test_a_move_to_a_json_name_is_syntax_checked_as_json(repo: Repo) -> None:
    patch = "*** Begin Patch\n*** Update File: src/util.py\n*** Move to: data.json\n*** End Patch\n"
    result = apply(repo, patch)
    assert (
        result.returncode == 1
        and "builtin:syntax" in result.stderr
        and "data.json" in result.stderr
    )
