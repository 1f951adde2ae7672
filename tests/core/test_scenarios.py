"""End-to-end behaviour of the pure patch layer, one scenario folder per case.

Each folder under ``tests/scenarios`` follows the Codex layout:

* ``input/``   — the files before (may be absent: an empty tree);
* the patch, exactly one of, read as bytes so CRLF survives, its name saying its format:

  * ``patch.txt``  — a Codex ``apply_patch`` payload (``--format codex``),
  * ``patch.diff`` — a unified diff, ``git diff`` or ``diff -u`` output (``--format unified``),
  * ``patch.json`` — text-editor commands (``--format edit-json``),
  * ``patch.blocks`` — SEARCH/REPLACE blocks (``--format search-replace``);

* ``expected/`` — the files after (absent: an empty tree);
* ``error.txt`` — only for refusals: the expected ``ApplyOnceError.kind`` on the first line, and on
  any further lines, texts the one-line error must contain. Then ``expected/`` equals ``input/``,
  and the test checks that nothing of the patch was applied.

Folder names say the format after the number (``042_unified_…``, ``064_editjson_…``,
``099_blocks_…``; the Codex ones
came first and have no tag). The engine under test is ``parse(text, format)`` + ``plan`` over a
:class:`DirReader`; the resulting :class:`TreePlan` is applied to an in-memory snapshot and
compared byte for byte. ``format="auto"`` must detect each scenario's format from its text.
Paths are normalised (and unsafe ones refused) as a call's arguments are:
``ApplyPatchArgs.from_patch`` between ``parse`` and ``plan``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from applyonce.core.identity import ApplyPatchArgs
from applyonce.core.paths import UnsafePathError
from applyonce.core.plan import MODE_EXEC, PlanError, TreePlan, plan
from applyonce.errors import ApplyOnceError
from applyonce.patch import PatchFormat, detect_format, parse
from tests.support.dirreader import DirReader

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"
SCENARIO_DIRS = sorted(p for p in SCENARIOS.iterdir() if p.is_dir()) if SCENARIOS.is_dir() else []
PATCH_FILES: dict[str, PatchFormat] = {
    "patch.txt": "codex",
    "patch.diff": "unified",
    "patch.json": "edit-json",
    "patch.blocks": "search-replace",
}


def scenario_patch(folder: Path) -> tuple[str, PatchFormat]:
    """The folder's one patch file: its text and its format."""
    found = [name for name in PATCH_FILES if (folder / name).exists()]
    assert len(found) == 1, f"{folder.name}: needs exactly one of {sorted(PATCH_FILES)}"
    return (folder / found[0]).read_bytes().decode("utf-8"), PATCH_FILES[found[0]]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` as ``{posix path: bytes}``; empty if ``root`` is absent."""
    if not root.is_dir():
        return {}
    files: dict[str, bytes] = {}
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            full = Path(dirpath) / name
            files[full.relative_to(root).as_posix()] = full.read_bytes()
    return files


def apply_plan(tree: dict[str, bytes], tree_plan: TreePlan) -> None:
    """Apply ``tree_plan`` to the snapshot ``tree`` in place."""
    for path in tree_plan.removed:
        del tree[path]  # KeyError: the plan removed a path that was not there
    for change in tree_plan.changes:
        if change.content is None:
            tree.pop(change.path, None)
        else:
            tree[change.path] = change.content


def test_scenarios_exist() -> None:
    assert len(SCENARIO_DIRS) > 0
    assert (SCENARIOS / ".gitattributes").read_text().split("\n").count("* -text") == 1
    formats = [scenario_patch(folder)[1] for folder in SCENARIO_DIRS]
    for format in PATCH_FILES.values():
        assert formats.count(format) >= 10, format


@pytest.mark.parametrize("folder", SCENARIO_DIRS, ids=[p.name for p in SCENARIO_DIRS])
def test_scenario(folder: Path, tmp_path: Path) -> None:
    work = tmp_path / "tree"
    if (folder / "input").is_dir():
        shutil.copytree(folder / "input", work)
    else:
        work.mkdir()
    before = snapshot(work)
    expected = snapshot(folder / "expected")
    patch_text, format = scenario_patch(folder)
    assert detect_format(patch_text) == format
    error_file = folder / "error.txt"
    expected_error, *must_say = (
        error_file.read_text().strip().split("\n") if error_file.exists() else [None]
    )

    tree = dict(before)
    try:
        args = ApplyPatchArgs.from_patch(
            parse(patch_text, format), ref="refs/heads/main", repo_root=None
        )
        apply_plan(tree, plan(args.patch(), DirReader(work)))
    except ApplyOnceError as exc:
        assert expected_error is not None, f"unexpected refusal: {exc.one_line()}"
        assert exc.kind == expected_error, exc.one_line()
        assert "\n" not in exc.one_line()
        for text in must_say:
            assert text in exc.one_line()
    else:
        assert expected_error is None, f"expected a {expected_error!r} refusal, the patch applied"

    if expected_error is not None:
        # The scenario data itself must say "nothing changes", and nothing did.
        assert expected == before
    else:
        # A success scenario that changes nothing could not catch a broken engine.
        assert expected != before
    assert tree == expected
    # The engine is pure: the tree it read is untouched whatever the outcome.
    assert snapshot(work) == before


# Plan rules a directory can show but a scenario folder cannot (symlinks, modes, summaries).


def _plan_text(root: Path, patch_text: str) -> TreePlan:
    return plan(parse(patch_text), DirReader(root))


def test_plan_keeps_executable_mode_on_update(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_bytes(b"#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    tree_plan = _plan_text(
        tmp_path,
        "*** Begin Patch\n*** Update File: run.sh\n@@\n-echo hi\n+echo bye\n*** End Patch\n",
    )
    (change,) = tree_plan.changes
    assert change.mode == MODE_EXEC
    assert change.content == b"#!/bin/sh\necho bye\n"


def test_plan_refuses_update_through_symlink(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_bytes(b"x\n")
    (tmp_path / "link.txt").symlink_to("real.txt")
    with pytest.raises(UnsafePathError):
        _plan_text(
            tmp_path, "*** Begin Patch\n*** Update File: link.txt\n@@\n-x\n+y\n*** End Patch\n"
        )


def test_plan_refuses_add_under_symlinked_directory(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to("real")
    with pytest.raises(UnsafePathError) as info:
        _plan_text(tmp_path, "*** Begin Patch\n*** Add File: alias/evil.txt\n+x\n*** End Patch\n")
    assert info.value.details["path"] == "alias/evil.txt"


def test_plan_refuses_add_under_a_file(tmp_path: Path) -> None:
    (tmp_path / "notadir").write_bytes(b"x\n")
    with pytest.raises(PlanError, match="is a file, not a directory"):
        _plan_text(tmp_path, "*** Begin Patch\n*** Add File: notadir/a.txt\n+x\n*** End Patch\n")


def test_plan_records_match_levels_and_summary(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"one  \ntwo\n")
    (tmp_path / "b.txt").write_bytes(b"gone\n")
    tree_plan = _plan_text(
        tmp_path,
        "*** Begin Patch\n*** Update File: a.txt\n*** Move to: c.txt\n@@\n-one\n+ONE\n"
        "*** Delete File: b.txt\n*** Add File: d.txt\n+d\n*** End Patch\n",
    )
    assert tree_plan.summary_lines() == ["M c.txt", "D b.txt", "A d.txt"]
    assert [c.action for c in tree_plan.changes] == ["move", "delete", "add"]
    assert tree_plan.changes[0].from_path == "a.txt"
    assert tree_plan.changes[0].match_levels[0].label == "rstrip"
    assert tree_plan.removed == ("a.txt", "b.txt")


def test_plan_refuses_move_to_self_with_its_own_message(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"x\n")
    with pytest.raises(PlanError) as info:
        _plan_text(
            tmp_path, "*** Begin Patch\n*** Update File: a.txt\n*** Move to: a.txt\n*** End Patch\n"
        )
    assert info.value.message == "operation 1 moves a.txt to itself"
    assert info.value.hint == "drop the rename ('*** Move to:', or 'rename from'/'rename to')"


def test_plan_refuses_a_path_named_twice_with_both_operation_numbers(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"x\n")
    with pytest.raises(PlanError) as info:
        _plan_text(
            tmp_path,
            "*** Begin Patch\n*** Add File: b.txt\n+b\n*** Update File: a.txt\n*** Move to: b.txt\n"
            "*** End Patch\n",
        )
    assert info.value.message == "b.txt is named by operations 1 and 2"
    assert info.value.details == {"path": "b.txt"}
