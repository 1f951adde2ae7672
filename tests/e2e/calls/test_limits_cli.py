"""The caps on one patch (git config ``applyonce.max*``), through the real CLI: each refuses with
a one-line error and exit 1, before anything is written — no commit, no file, no state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from applyonce.core.plan import plan
from applyonce.patch import parse
from tests.conftest import Repo, apply, write_files
from tests.support.dirreader import DirReader


def _assert_refused(repo: Repo, patch: str, message: str, *args: str) -> None:
    before = repo.files()
    head = repo.head()
    result = apply(repo, patch, *args)
    assert result.returncode == 1, result
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert repo.head() == head
    assert repo.files() == before
    assert repo.git("status", "--porcelain") == ""
    assert not repo.state_dir().exists()  # refused before any state was made


def _adds(count: int) -> str:
    files = "".join(f"*** Add File: new/{i}.txt\n+{i}\n" for i in range(count))
    return f"*** Begin Patch\n{files}*** End Patch\n"


def test_patch_bytes_cap_comes_from_git_config(repo: Repo) -> None:
    repo.git("config", "applyonce.maxPatchBytes", "1k")
    patch = "*** Begin Patch\n*** Add File: a.txt\n" + "+line\n" * 300 + "*** End Patch\n"
    _assert_refused(
        repo,
        patch,
        "the patch is larger than 1 KiB; split the change into several smaller "
        "patches, or raise the limit: git config applyonce.maxPatchBytes N",
    )
    repo.git("config", "applyonce.maxPatchBytes", "4k")
    assert apply(repo, patch).returncode == 0


def test_files_cap(repo: Repo) -> None:
    repo.git("config", "applyonce.maxFiles", "3")
    _assert_refused(repo, _adds(4), "the patch has 4 file operations, more than the limit of 3")
    assert apply(repo, _adds(3)).returncode == 0


def test_line_cap_in_a_codex_patch_and_in_edit_json(repo: Repo) -> None:
    repo.git("config", "applyonce.maxLineBytes", "100")
    long_line = "x" * 101
    codex = f"*** Begin Patch\n*** Add File: a.txt\n+{long_line}\n*** End Patch\n"
    _assert_refused(repo, codex, "patch line 3 is longer than 100 bytes")
    # An edit-json patch is one line of JSON: the lines of the texts it writes are capped.
    edit = json.dumps([{"command": "create", "path": "b.txt", "file_text": f"ok\n{long_line}\n"}])
    _assert_refused(repo, edit, "a line the patch writes to b.txt is longer than 100 bytes")
    short = json.dumps([{"command": "create", "path": "b.txt", "file_text": "x" * 90 + "\n"}])
    assert apply(repo, short).returncode == 0


def test_write_cap_counts_copies_and_moves(repo: Repo) -> None:
    # 20 copies of a 64 KiB file write 1.25 MiB from a patch of 2 KB.
    write_files(repo.path, {"big.txt": ("y" * 63 + "\n") * 1024})
    repo.git("add", "big.txt")
    repo.git("commit", "-qm", "big")
    repo.git("config", "applyonce.maxWriteBytes", "1m")
    copies = "".join(
        f"diff --git a/big.txt b/c{i}.txt\nsimilarity index 100%\ncopy from big.txt\n"
        f"copy to c{i}.txt\n"
        for i in range(20)
    )
    assert len(copies) < 2500
    _assert_refused(
        repo, copies, "the patch would write up to 1280 KiB, more than the limit of 1 MiB"
    )
    moves = "".join(
        f"*** Update File: {name}\n*** Move to: moved/{name}\n"
        for name in ("big.txt", "src/util.py")
    )
    repo.git("config", "applyonce.maxWriteBytes", "64k")
    _assert_refused(repo, f"*** Begin Patch\n{moves}*** End Patch\n", "would write up to")
    repo.git("config", "applyonce.maxWriteBytes", "70k")
    assert apply(repo, f"*** Begin Patch\n{moves}*** End Patch\n").returncode == 0


@pytest.mark.parametrize("value", ["lots", "0", "-5"])
def test_a_bad_cap_in_git_config_is_a_usage_error(repo: Repo, value: str) -> None:
    repo.git("config", "applyonce.maxFiles", value)
    head = repo.head()
    result = apply(repo, _adds(1))
    assert result.returncode == 2, result
    assert result.stderr == (
        "error: git config applyonce.maxFiles is not a positive number; set it to a number of "
        "files (k, m and g suffixes allowed), or unset it for the default\n"
    )
    assert repo.head() == head and not repo.state_dir().exists()


def test_the_plan_stops_at_the_write_cap(tmp_path: Path) -> None:
    # The bound above is judged on the tip before the call; the plan itself holds the cap too
    # (a restage on a tip whose files grew), and stops before it holds much more than it.
    from applyonce.patch import LimitError, Limits

    root = tmp_path
    write_files(root, {"big.txt": "z" * 1000 + "\n"})
    copies = "".join(
        f"diff --git a/big.txt b/c{i}.txt\ncopy from big.txt\ncopy to c{i}.txt\n" for i in range(10)
    )
    patch = parse(copies)
    assert len(plan(patch, DirReader(root), limits=Limits(write_bytes=10_010)).changes) == 10
    with pytest.raises(LimitError, match="would write at least 10,010 bytes"):
        plan(patch, DirReader(root), limits=Limits(write_bytes=10_009))
