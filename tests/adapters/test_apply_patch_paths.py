"""``apply_patch`` reads a patch's paths from the current directory, as Codex does, and prints them
as the patch spelled them, in Codex's order (``applyonce.adapters.apply_patch_cmd``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from applyonce.adapters.apply_patch_cmd import codex_failure, invalid_patch_line, locate, summary
from applyonce.core.receipt import FileRecord
from applyonce.errors import UsageError

PATCH = (
    "*** Begin Patch\n"
    "*** Update File: leaf.txt\n@@\n-a\n+b\n"
    "*** Update File: ../mod.py\n*** Move to: ./../../top.py\n@@\n-x\n+y\n"
    "  *** Delete File: gone.txt\r\n"
    "*** Add File: {abs}/pkg/new.txt\n+ *** Add File: not/a/header\n"
    "*** End Patch\n"
)


def test_paths_are_read_from_the_current_directory(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    (root / "pkg/sub").mkdir(parents=True)
    located = locate(PATCH.format(abs=root), str(root / "pkg/sub"), str(root))
    assert located.text == (
        "*** Begin Patch\n"
        "*** Update File: pkg/sub/leaf.txt\n@@\n-a\n+b\n"
        "*** Update File: pkg/mod.py\n*** Move to: top.py\n@@\n-x\n+y\n"
        "  *** Delete File: pkg/sub/gone.txt\r\n"
        "*** Add File: pkg/new.txt\n+ *** Add File: not/a/header\n"
        "*** End Patch\n"
    )
    assert located.spelled == {
        "pkg/sub/leaf.txt": "leaf.txt",
        "pkg/mod.py": "../mod.py",
        "top.py": "./../../top.py",
        "pkg/sub/gone.txt": "gone.txt",
        "pkg/new.txt": f"{root}/pkg/new.txt",
    }


def test_at_the_root_the_text_is_unchanged(tmp_path: Path) -> None:
    text = "*** Begin Patch\n*** Update File: ./a//b.py\n@@\n-a\n+b\n*** End Patch\n"
    assert locate(text, str(tmp_path), str(tmp_path)).text == text


def test_a_path_out_of_the_work_tree_is_left_for_the_call_to_refuse(tmp_path: Path) -> None:
    text = "*** Begin Patch\n*** Add File: ../../x\n+x\n*** Add File: /etc/x\n+x\n*** End Patch\n"
    (tmp_path / "sub").mkdir()
    assert locate(text, str(tmp_path / "sub"), str(tmp_path)).text == text


def test_a_current_directory_outside_the_work_tree_is_refused(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    with pytest.raises(UsageError, match="is not inside the work tree"):
        locate("*** Begin Patch\n*** End Patch\n", str(tmp_path), str(tmp_path / "tree"))


def test_the_summary_is_in_codex_order_and_spelling() -> None:
    def record(path: str, action: str, from_: str | None = None) -> FileRecord:
        return FileRecord.model_validate(
            {
                "path": path,
                "action": action,
                "from": from_,
                "blob": None,
                "sha256": None,
                "mode": None,
            }
        )

    files = [
        record("d.txt", "delete"),
        record("m.txt", "update"),
        record("n.txt", "add"),
        record("to.txt", "move", "from.txt"),
        record("a.txt", "add"),
    ]
    text = summary(files, {"m.txt": "./m.txt"})
    assert text == (
        "Success. Updated the following files:\nA n.txt\nA a.txt\nM ./m.txt\nM to.txt\nD d.txt\n"
    )


def test_codex_lines_for_the_failures_it_names_right() -> None:
    spelled = {"pkg/m.py": "../m.py"}
    mismatch = {"kind": "hunk-mismatch", "path": "pkg/m.py", "expected": ["a", "b"]}
    assert codex_failure(mismatch, spelled, "/w/pkg/sub") == (
        "Failed to find expected lines in /w/pkg/m.py:\na\nb\n"
    )
    missing = {"kind": "plan", "path": "x", "message": "cannot update x: no such file"}
    assert codex_failure(missing, {}, "/w") == (
        "Failed to read file to update /w/x: No such file or directory (os error 2)\n"
    )
    gone = {"kind": "plan", "path": "x", "message": "cannot delete x: no such file"}
    assert codex_failure(gone, {}, "/w") == "Failed to delete file /w/x\n"
    assert codex_failure({"kind": "already-exists", "path": "x"}, {}, "/w") == ""
    assert invalid_patch_line("hello").startswith("Invalid patch: The first line")
    assert invalid_patch_line("*** Begin Patch\n").startswith("Invalid patch: The last line")
    assert invalid_patch_line("*** Begin Patch\n*** Frob\n*** End Patch") == ""
