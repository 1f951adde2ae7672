"""Wrapped Codex patches against the real Codex binary: a patch in a markdown fence, after
``cd DIR && apply_patch <<'EOF'``, or inside ``apply_patch "$(cat <<'EOF' … EOF)"`` does in
applyonce what the real Codex does with the bare patch, run in DIR (Codex's shell-command layer
takes these wrappers off and runs the patch there; its ``apply_patch`` entry point alone refuses
them, which is checked too, so the comparison is with what Codex would do for the agent).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.peers.codex_differential import find_codex_binary, run_applyonce, run_codex

BINARY = find_codex_binary()
pytestmark = pytest.mark.skipif(BINARY is None, reason="the Codex binary is missing")

TREE = {
    "src/a.py": b"def f():\n    return 1\n",
    "src/old.py": b"x = 1\n",
    "README.md": b"# demo\n",
}
PATCH = (
    "*** Begin Patch\n*** Update File: a.py\n@@ def f():\n-    return 1\n+    return 2\n"
    "*** Add File: pkg/new.py\n+y = 2\n*** Update File: old.py\n*** Move to: renamed.py\n@@\n"
    "-x = 1\n+x = 3\n*** End Patch\n"
)

ROOTED = PATCH.replace(" a.py", " src/a.py").replace(" old.py", " src/old.py")


@pytest.mark.parametrize(
    ("wrapped", "cwd"),
    [
        ("cd src && apply_patch <<'EOF'\n" + PATCH + "EOF\n", "src"),
        ("cd ./src/ && apply_patch \"$(cat <<'EOF'\n" + PATCH + 'EOF\n)"\n', "src"),
        (
            "I'll apply this:\n\n```bash\ncd src && apply_patch <<'EOF'\n" + PATCH + "EOF\n```\n",
            "src",
        ),
        ("```\n" + ROOTED + "```\n", ""),
        ("apply_patch \"$(cat <<'EOF'\n" + ROOTED + 'EOF\n)"', ""),
    ],
    ids=[
        "cd-heredoc",
        "cd-cat-substitution",
        "fenced-cd-heredoc",
        "fence",
        "cat-substitution-no-cd",
    ],
)
def test_a_wrapped_patch_does_what_codex_does_with_the_bare_patch(
    wrapped: str, cwd: str, tmp_path: Path
) -> None:
    assert BINARY is not None
    bare = wrapped[wrapped.index("*** Begin Patch") : wrapped.index("*** End Patch") + 14]
    codex = run_codex(BINARY, TREE, bare, workdir=tmp_path, cwd=cwd)
    ours = run_applyonce(TREE, wrapped)
    assert codex.ok, codex.message
    assert ours.ok, ours.message
    assert dict(ours.tree) == dict(codex.tree)
    # Codex's apply_patch entry point alone does not take these wrappers off.
    alone = run_codex(BINARY, TREE, wrapped, workdir=tmp_path, cwd=cwd)
    assert not alone.ok and dict(alone.tree) == TREE
