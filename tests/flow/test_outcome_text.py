"""``CallOutcome.text`` / ``render(terms)``: the text a harness gives its model for a call made
through the Python API; a replay says so first, in the API's terms."""

from __future__ import annotations

from applyonce import Executor
from applyonce.core.hints import CLI, MCP
from tests.conftest import UTIL_PATCH, Repo

SUCCESS = "Success. Updated the following files:\nM src/util.py\n"


def test_a_call_renders_its_output_and_a_replay_after_a_revert_says_so_first(repo: Repo) -> None:
    executor = Executor(repo.path)
    try:
        first = executor.call(UTIL_PATCH)
        assert first.text == SUCCESS and first.render(MCP) == SUCCESS
        commit = repo.head()
        repo.git("revert", "--no-edit", "HEAD")
        revert = repo.head()
        again = executor.call(UTIL_PATCH)
    finally:
        executor.close()
    assert again.replayed and again.receipt.exit_code == 0
    head = (
        f"replayed: this call ({first.receipt.call_id[:12]}) ran before and made commit "
        f"{commit[:12]} on main; nothing ran now.\n"
        f"reverted: commit {revert[:12]} (git revert) reverted it since: src/util.py no longer "
        "holds its change.\n"
    )
    assert again.text == (
        head + "to make this change again, call again with CallOptions(attempt=2).\n"
        "its stored result:\n" + SUCCESS
    )
    assert again.render(CLI) == (
        head + "to make this change again, pass --attempt 2.\nits stored result:\n" + SUCCESS
    )
    assert (repo.path / "src/util.py").read_text() == "VALUE = 1\n"  # nothing ran
