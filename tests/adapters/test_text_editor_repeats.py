"""The text editor tool on a real repository: an edit repeated after the user undid it by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from applyonce.adapters.agents import ToolCallAdapter
from tests.conftest import make_repo, stored_text


def _edit(adapter: ToolCallAdapter, tool_use_id: str, old: str, new: str) -> dict[str, Any]:
    block = {
        "type": "tool_use",
        "id": tool_use_id,
        "name": "str_replace_based_edit_tool",
        "input": {"command": "str_replace", "path": "f.txt", "old_str": old, "new_str": new},
    }
    [result] = adapter.run({"role": "assistant", "content": [block]})
    return result


def _text(result: dict[str, Any]) -> str:
    content = result["content"]
    return content if isinstance(content, str) else "".join(c.get("text", "") for c in content)


def test_an_edit_made_then_undone_then_asked_again_is_not_told_it_succeeded(
    tmp_path: Path,
) -> None:
    """toolu_0 replaces b with B, toolu_1 puts b back, toolu_2 (a new tool call) replaces b with
    B again. The file still says b after toolu_2 (the edit is taken for toolu_0's repeat), yet
    the result is not an error and starts 'Successfully replaced text'. The model then believes
    f.txt holds B. Either the edit is made, or the result must not claim success."""
    repo = make_repo(tmp_path / "repo", {"f.txt": "a\nb\nc\n"})
    adapter = ToolCallAdapter(repo.path)
    assert not _edit(adapter, "toolu_0", "b", "B").get("is_error")
    assert not _edit(adapter, "toolu_1", "B", "b").get("is_error")
    third = _edit(adapter, "toolu_2", "b", "B")
    # The earlier edit was undone since, so the new tool call's edit is made (the next attempt).
    assert not third.get("is_error"), _text(third)
    assert (repo.path / "f.txt").read_text() == "a\nB\nc\n"
    assert _text(third).startswith("Successfully")
    # A harness replaying the same tool call gets the same answer and nothing runs again.
    commits = repo.commit_count()
    assert stored_text(_text(_edit(adapter, "toolu_2", "b", "B"))) == _text(third)
    assert repo.commit_count() == commits
