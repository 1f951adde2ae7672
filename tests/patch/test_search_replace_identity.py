"""The identity of a SEARCH/REPLACE call, and the identities that were there before it.

A block and the Codex hunk of the same lines are two calls: a block is searched in the whole file
as the blocks before it left it, a Codex hunk after the hunk before it, so they may apply at
different places (``Hunk.block`` is dumped). A file an empty SEARCH creates is the same call as
Codex's ``Add File`` of it. Formats that existed before keep their Call-Ids, so old receipts stay
readable: the values pinned here were computed on the code before SEARCH/REPLACE blocks existed.
"""

from __future__ import annotations

from applyonce.core.identity import ApplyPatchArgs, CallIdentity
from applyonce.patch import parse

REF = "refs/heads/main"

CODEX = (
    "*** Begin Patch\n*** Update File: src/app.py\n@@ def greet(name):\n"
    "-    return 'hello ' + name\n+    return f'Hello, {name}!'\n"
    "*** Add File: docs/n.md\n+note\n*** End Patch\n"
)
GIT = (
    "diff --git a/src/app.py b/src/app.py\n--- a/src/app.py\n+++ b/src/app.py\n"
    "@@ -1,2 +1,2 @@\n def greet(name):\n-    return 'hello ' + name\n"
    "+    return f'Hello, {name}!'\n"
)
EDIT_JSON = (
    '[{"command": "str_replace", "path": "src/app.py", "old_str": "hello", "new_str": "Hello"}]'
)


def args(text: str) -> ApplyPatchArgs:
    return ApplyPatchArgs.from_patch(parse(text), ref=REF, repo_root="/repo")


def call_id(text: str) -> str:
    return CallIdentity.compute(args(text).sha256()).call_id


def test_existing_formats_keep_their_call_ids() -> None:
    assert args(CODEX).sha256() == (
        "bc25feddd474b4af8052cb42146f57c9c99e3e4f16138b5c9f4ab6e9d8cfabed"
    )
    assert call_id(CODEX) == "cfbb4c4e973f02c10c12a39a7727bbb12b1467ec24ab7f01a08d26b939373c8b"
    assert call_id(GIT) == "8e48de7978472f6e5ba5e59a2a74d9b78a8482cb92b4e9eda2eb74f2650fe121"
    assert call_id(EDIT_JSON) == (
        "4f4714d3f67c8fabf7d5cccfd8d70a346555d96bca629c7a1a766511b5463be1"
    )
    # And their dumps say nothing of blocks.
    assert '"block"' not in args(CODEX).canonical().decode()


SR_UPDATE = """src/app.py
<<<<<<< SEARCH
    return 'hello ' + name
=======
    return f'Hello, {name}!'
>>>>>>> REPLACE
"""
CODEX_UPDATE = """*** Begin Patch
*** Update File: src/app.py
@@
-    return 'hello ' + name
+    return f'Hello, {name}!'
*** End Patch
"""


def test_a_block_and_the_codex_hunk_of_the_same_lines_are_two_calls() -> None:
    block, codex = args(SR_UPDATE).model_dump(), args(CODEX_UPDATE).model_dump()
    hunk = block["operations"][0]["hunks"][0]
    assert hunk.pop("block") is True
    assert block == codex  # nothing else differs
    assert args(SR_UPDATE).sha256() != args(CODEX_UPDATE).sha256()


def test_a_file_created_by_an_empty_search_is_the_codex_add_file_call() -> None:
    sr = "docs/n.md\n<<<<<<< SEARCH\n=======\nnote\n>>>>>>> REPLACE\n"
    codex = "*** Begin Patch\n*** Add File: docs/n.md\n+note\n*** End Patch\n"
    assert args(sr).sha256() == args(codex).sha256()


def test_the_spelling_of_the_blocks_is_not_part_of_the_identity() -> None:
    cline = SR_UPDATE.replace("<<<<<<< SEARCH", "------- SEARCH").replace(
        ">>>>>>> REPLACE", "+++++++ REPLACE"
    )
    fenced = SR_UPDATE.replace("src/app.py\n", "Change it:\n\nsrc/app.py\n```python\n") + "```\n"
    roo = SR_UPDATE.replace("SEARCH\n", "SEARCH\n:start_line:2\n-------\n")
    for text in (cline, fenced, roo, SR_UPDATE.replace("\n", "\r\n")):
        assert args(text).sha256() == args(SR_UPDATE).sha256()
