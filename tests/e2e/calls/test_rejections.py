"""Patches refused whole, with a one-line error: one that changes nothing, a hunk that fails in
the third file, a malformed patch, text that is not UTF-8, a NUL byte."""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import Repo, Run, apply, run_cli, stored_text


def test_a_patch_that_changes_nothing_is_refused_not_an_empty_commit(repo: Repo) -> None:
    change = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"
    )
    assert apply(repo, change).returncode == 0
    head = repo.head()
    # The file already is what the patch makes it: the context-only hunk changes nothing.
    again = apply(repo, change.replace("-VALUE = 1\n+VALUE = 2", " VALUE = 2"))
    assert again.returncode == 1
    assert (
        again.stderr.startswith("error: the patch changes nothing")
        and again.stderr.count("\n") == 1
    )
    assert repo.head() == head


def test_failing_hunk_in_third_file_rejects_everything(repo: Repo) -> None:
    before = repo.files()
    head = repo.head()
    patch = """*** Begin Patch
*** Add File: new.txt
+new
*** Update File: src/util.py
@@
-VALUE = 1
+VALUE = 2
*** Update File: src/app.py
@@
-    return 'goodbye ' + name
+    return 'bye'
*** End Patch
"""
    result = apply(repo, patch, "--json")
    assert result.returncode == 1
    receipt = orjson.loads(result.stdout)
    assert receipt["status"] == "rejected"
    assert receipt["commit"] is None
    assert receipt["error"]["kind"] == "hunk-mismatch"
    assert receipt["error"]["path"] == "src/app.py"
    assert receipt["error"]["hunk"] == 1
    assert receipt["error"]["expected"] == ["    return 'goodbye ' + name"]
    assert repo.head() == head
    assert repo.files() == before
    replay = apply(repo, patch)
    assert replay.returncode == 1
    assert replay.stderr.startswith("replayed: this call (")
    text = Run(replay.returncode, replay.stdout, stored_text(replay.stderr))
    assert text.stderr.startswith("error: src/app.py: hunk 1: expected lines not found")
    # The stored rejection (a repeat on the same tip): its output (the error line, then the
    # repair data), then the one line that says it is the stored one.
    assert text.stderr.startswith(receipt["output"])
    assert text.stderr.split("\n")[1] == "expected lines (1), not found in src/app.py:"
    rest = text.stderr.removeprefix(receipt["output"])
    assert rest.count("\n") == 1 and "the stored rejection is returned" in rest


def test_malformed_patch_writes_nothing(repo: Repo) -> None:
    result = apply(repo, "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n")
    assert result.returncode == 1
    assert result.stderr == (
        "error: patch line 2: expected '*** Add File: ', '*** Delete File: ' or "
        "'*** Update File: ', found '*** Frobnicate File: x'; fix the patch text and send it again\n"
    )
    assert not repo.state_dir().exists()


@pytest.mark.parametrize(
    "data",
    [
        b"*** Begin Patch\n*** Add File: a\n+\xff\n*** End Patch\n",
        b'[{"command": "create", "path": "a", "file_text": "\xff"}]',
    ],
    ids=["codex", "edit-json"],
)
def test_non_utf8_codex_or_edit_json_patch_is_refused(repo: Repo, data: bytes) -> None:
    # Only unified diffs carry bytes that are not UTF-8 (byte for byte, as git apply does).
    result = run_cli("apply", "-", "--repo", str(repo.path), input=data)
    assert result.returncode == 1, result
    assert "not UTF-8" in result.stderr and result.stderr.count("\n") == 1
    assert not repo.state_dir().exists()


def test_nul_bytes_in_added_text_are_refused(repo: Repo) -> None:
    result = apply(repo, "*** Begin Patch\n*** Add File: nul.txt\n+a\x00b\n*** End Patch\n")
    assert result.returncode == 1
    assert result.stderr == (
        "error: nul.txt: the patch writes a NUL byte; applyonce only writes text; "
        "remove the NUL byte from the patch\n"
    )
    assert not (repo.path / "nul.txt").exists()
