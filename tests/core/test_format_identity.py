"""One change, one identity, whichever format spelled it (docs/design.md §3).

A Codex patch and the ``git diff`` of the same change (same context lines, a bare ``@@``), and a
text-editor ``create``/``delete``, give equal ``ApplyPatchArgs`` dumps and so one ``call_id``. What
only positions a hunk (line numbers, where it sat in the text) is left out; what only some formats
say (file modes, a missing final newline) is dumped only when said, so Codex patches keep the
identity they had before those fields existed.
"""

from __future__ import annotations

import json

import pytest

from applyonce.core.identity import ApplyPatchArgs
from applyonce.core.paths import UnsafePathError
from applyonce.patch import CopyFile, EditFile, Patch, parse
from tests.conftest import without_line_numbers

REF = "refs/heads/main"


def args(text: str, format: str = "auto") -> ApplyPatchArgs:
    return ApplyPatchArgs.from_patch(parse(text, format), ref=REF, repo_root="/repo")  # type: ignore[arg-type]


CODEX_UPDATE = """*** Begin Patch
*** Update File: src/app.py
@@
 def greet(name):
-    return "hi " + name
+    return f"Hello, {name}!"
 
 
 x = 1
*** End Patch
"""

GIT_UPDATE = """diff --git a/src/app.py b/src/app.py
index 3220b2b..12f3153 100644
--- a/src/app.py
+++ b/src/app.py
@@ -7,5 +7,5 @@ import os
 def greet(name):
-    return "hi " + name
+    return f"Hello, {name}!"
 
 
 x = 1
"""


def test_codex_update_and_its_git_diff_differ_only_in_the_line_numbers() -> None:
    codex, git = args(CODEX_UPDATE), args(GIT_UPDATE)
    assert codex.model_dump() == without_line_numbers(git.model_dump())
    # The line numbers pick the place where the context is not unique: two calls.
    assert git.operations[0].hunks[0].old_start == 7  # type: ignore[union-attr]
    assert codex.sha256() != git.sha256()


def test_line_numbers_change_the_identity() -> None:
    # Regression: two diffs meaning two places (the same context twice in the file) were one
    # call, and the second was answered with the first one's receipt, never applied.
    elsewhere = GIT_UPDATE.replace("@@ -7,5 +7,5 @@ import os", "@@ -70,5 +71,5 @@")
    assert args(elsewhere).sha256() != args(GIT_UPDATE).sha256()
    # The label after the closing @@ is not part of it.
    relabelled = GIT_UPDATE.replace("@@ -7,5 +7,5 @@ import os", "@@ -7,5 +7,5 @@")
    assert args(relabelled).sha256() == args(GIT_UPDATE).sha256()


def test_context_lines_do_change_the_identity() -> None:
    less_context = GIT_UPDATE.replace("@@ -7,5 +7,5 @@", "@@ -7,4 +7,4 @@").replace(" x = 1\n", "")
    assert args(less_context).sha256() != args(GIT_UPDATE).sha256()


@pytest.mark.parametrize(
    "text",
    [
        "diff --git a/docs/n.md b/docs/n.md\nnew file mode 100644\nindex 0000000..1\n--- /dev/null\n"
        "+++ b/docs/n.md\n@@ -0,0 +1,2 @@\n+# N\n+body\n",
        json.dumps([{"command": "create", "path": "/repo/docs/n.md", "file_text": "# N\nbody\n"}]),
    ],
    ids=["git-new-file", "edit-json-create"],
)
def test_added_file_is_one_call_in_every_format(text: str) -> None:
    codex = "*** Begin Patch\n*** Add File: ./docs/n.md\n+# N\n+body\n*** End Patch\n"
    assert args(text).sha256() == args(codex).sha256()


@pytest.mark.parametrize(
    "text",
    [
        "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n--- a/old.txt\n+++ /dev/null\n"
        "@@ -1 +0,0 @@\n-bye\n",
        json.dumps({"command": "delete", "path": "old.txt"}),
    ],
    ids=["git-deleted-file", "edit-json-delete"],
)
def test_deleted_file_is_one_call_in_every_format(text: str) -> None:
    codex = "*** Begin Patch\n*** Delete File: old.txt\n*** End Patch\n"
    assert args(text).sha256() == args(codex).sha256()


def test_git_rename_with_an_edit_is_the_codex_move() -> None:
    codex = (
        "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n@@\n x\n-y\n+Y\n*** End Patch\n"
    )
    git = (
        "diff --git a/a.py b/b.py\nsimilarity index 60%\nrename from a.py\nrename to b.py\n"
        "--- a/a.py\n+++ b/b.py\n@@ -1,2 +1,2 @@\n x\n-y\n+Y\n"
    )
    assert args(codex).model_dump() == without_line_numbers(args(git).model_dump())
    pure = "diff --git a/a.py b/b.py\nsimilarity index 100%\nrename from a.py\nrename to b.py\n"
    codex_pure = "*** Begin Patch\n*** Update File: a.py\n*** Move to: b.py\n*** End Patch\n"
    assert args(pure).sha256() == args(codex_pure).sha256()


def test_codex_dumps_are_what_they_were_before_the_new_fields() -> None:
    text = (
        "*** Begin Patch\n*** Add File: docs/a.md\n+hi\n*** Delete File: old.txt\n"
        "*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def greet(name):\n"
        "-    return 1\n+    return 2\n*** End of File\n*** End Patch\n"
    )
    codex = ApplyPatchArgs.from_patch(parse(text), ref=REF, repo_root=None)
    # Computed with the code before unified diffs and edit commands existed.
    assert codex.canonical() == (
        b'{"operations":[{"content":"hi\\n","op":"add","path":"docs/a.md"},'
        b'{"op":"delete","path":"old.txt"},{"hunks":[{"anchors":["def greet(name):"],'
        b'"end_of_file":true,"lines":[{"kind":"-","text":"    return 1"},'
        b'{"kind":"+","text":"    return 2"}]}],"move_to":"src/main.py","op":"update",'
        b'"path":"src/app.py"}],"ref":"refs/heads/main"}'
    )
    assert codex.sha256() == "c67e74e2dde2e371871c5d79677556a367473f8210c5577caac18324220fc700"


def test_what_only_unified_diffs_say_is_part_of_the_identity() -> None:
    plain = args("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n")
    no_newline = args(
        "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\n\\ No newline at end of file\n"
    )
    assert plain.sha256() != no_newline.sha256()
    chmod = args("diff --git a/f b/f\nold mode 100644\nnew mode 100755\n")
    assert chmod.model_dump()["operations"][0]["mode"] == "100755"


def test_from_patch_normalises_and_checks_copy_and_edit_paths() -> None:
    copy = args(
        # No '---'/'+++' lines: git, and applyonce, refuse ones that name other files than the
        # copy lines do, and './x' is not 'x' to them.
        "diff --git a/x b/y\ncopy from ./x\ncopy to /repo/sub//y\n@@ -1 +1 @@\n-1\n+2\n"
    )
    (op,) = copy.operations
    assert isinstance(op, CopyFile)
    assert (op.path, op.copy_to) == ("x", "sub/y")
    edit = args(json.dumps([{"command": "str_replace", "path": "/repo/./a.py", "old_str": "x"}]))
    (op2,) = edit.operations
    assert isinstance(op2, EditFile) and op2.path == "a.py"
    assert op2.commands[0].index == 0  # kept for error messages, outside the dump
    with pytest.raises(UnsafePathError):
        args("diff --git a/x b/y\ncopy from x\ncopy to ../y\n")
    with pytest.raises(UnsafePathError):
        args(
            json.dumps(
                [{"command": "insert", "path": ".git/config", "insert_line": 0, "insert_text": "x"}]
            )
        )


def test_args_round_trip_through_their_dump() -> None:
    for text in (
        GIT_UPDATE,
        json.dumps([{"command": "insert", "path": "a", "insert_line": 2, "insert_text": "x"}]),
    ):
        original = args(text)
        again = ApplyPatchArgs.model_validate(original.model_dump(mode="json"))
        assert again.sha256() == original.sha256()
        assert isinstance(again.patch(), Patch)
