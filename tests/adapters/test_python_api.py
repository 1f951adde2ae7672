"""The Python API: ``Executor(repo).apply(patch) -> Receipt``; bad input raises and writes nothing."""

from __future__ import annotations

import pytest

from applyonce import Executor, Receipt
from applyonce.errors import ApplyOnceError
from tests.conftest import UTIL_PATCH as PATCH
from tests.conftest import Repo


def test_apply_returns_a_receipt(repo: Repo) -> None:
    receipt = Executor(repo.path).apply(PATCH, tool_call_id="call_9")
    assert isinstance(receipt, Receipt)
    assert receipt.status == "committed"
    assert receipt.commit == repo.head()
    assert [(f.path, f.action) for f in receipt.files] == [("src/util.py", "update")]
    assert receipt.output == "Success. Updated the following files:\nM src/util.py\n"
    assert receipt.tool_call_id == "call_9"
    assert receipt.match_levels == {"src/util.py": ["exact"]}
    again = Executor(repo.path).apply(PATCH, tool_call_id="call_9")
    assert again == receipt


def test_bad_input_raises_without_writing(repo: Repo) -> None:
    with pytest.raises(ApplyOnceError, match=r"contains '\.\.'"):
        Executor(repo.path).apply(PATCH.replace("src/util.py", "../x.py"))
    assert not repo.state_dir().exists()
