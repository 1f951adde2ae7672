"""Repair data where the model reads it: a rejection for lines that are not in the file shows every
expected line, then the nearest region of the file numbered ``NN | text``, then a hint; a patch
whose new lines are already there asks whether it was applied already, and says where.

Each runs the real CLI on a real repository: the text is the receipt's output (stderr here, the
tool result over MCP and the adapter), and the first line stays the one-line ``error:`` summary.
"""

from __future__ import annotations

import time
from pathlib import Path

import orjson
import pytest

from applyonce.patch import HunkApplyError, parse
from applyonce.patch.apply import apply_hunks
from tests.conftest import apply, make_repo, run_cli

# 30 lines: a cart module with a function in the middle that a stale patch misremembers.
CART = (
    "".join(f"# line {n}\n" for n in range(1, 11))
    + "def total(prices):\n"  # 11
    + "    subtotal = sum(prices)\n"  # 12
    + "    return subtotal\n"  # 13
    + "".join(f"# line {n}\n" for n in range(14, 31))
)


def test_codex_mismatch_prints_every_expected_line_and_the_nearest_region(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"cart.py": CART})
    head = repo.head()
    patch = (
        "*** Begin Patch\n*** Update File: cart.py\n@@ def total(prices):\n"
        "     subtotal = sum(prices)\n-    return round(subtotal)\n+    return round(subtotal, 2)\n"
        "*** End Patch\n"
    )
    result = apply(repo, patch)
    assert result.returncode == 1
    assert result.stderr.split("\n") == [
        "error: cart.py: hunk 1: expected lines not found (first: '    subtotal = sum(prices)'); "
        "re-read the file and send a patch whose context lines match it",
        "expected lines (2), not found in cart.py:",
        "   |     subtotal = sum(prices)",
        "   |     return round(subtotal)",
        "nearest lines in cart.py (lines 10-15; 1 of 2 expected lines equal, whitespace ignored):",
        "10 | # line 10",
        "11 | def total(prices):",
        "12 |     subtotal = sum(prices)",
        "13 |     return subtotal",
        "14 | # line 14",
        "15 | # line 15",
        "hint: copy the lines to change from the numbered lines above, without the 'NN | ' "
        "prefix, then send the change again",
        "",
    ]
    assert repo.head() == head and repo.files()["cart.py"] == CART.encode()
    # The receipt keeps the data the text is made of; replay derives the same text from it.
    receipt = orjson.loads(apply(repo, patch, "--json").stdout)
    assert receipt["error"]["region_start"] == 10 and receipt["error"]["region_equal"] == 1
    assert receipt["output"] == result.stderr
    assert run_cli("replay", "--repo", str(repo.path)).returncode == 0


def test_unified_diff_mismatch_shows_the_nearest_region(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"cart.py": CART})
    diff = (
        "--- a/cart.py\n+++ b/cart.py\n@@ -11,3 +11,3 @@\n def total(prices):\n"
        "-    subtotal = sum(prices) + 0\n+    subtotal = sum(prices) + 1\n     return subtotal\n"
    )
    result = apply(repo, diff)
    assert result.returncode == 1
    lines = result.stderr.split("\n")
    assert lines[0].startswith("error: cart.py: hunk 1 (@@ -11,3 @@): expected lines not found")
    assert lines[1:5] == [
        "expected lines (3), not found in cart.py:",
        "   | def total(prices):",
        "   |     subtotal = sum(prices) + 0",
        "   |     return subtotal",
    ]
    assert lines[5] == (
        "nearest lines in cart.py (lines 9-15; 2 of 3 expected lines equal, whitespace ignored):"
    )
    assert lines[6] == " 9 | # line 9" and lines[8] == "11 | def total(prices):"


def test_str_replace_not_found_shows_the_nearest_region(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"cart.py": CART})
    edit = orjson.dumps(
        [
            {
                "command": "str_replace",
                "path": "cart.py",
                "old_str": "def total(prices):\n    subtotal = sum(prices)\n    return  total\n",
                "new_str": "def total(prices):\n    return sum(prices)\n",
            }
        ]
    ).decode()
    result = apply(repo, edit)
    assert result.returncode == 1
    lines = result.stderr.split("\n")
    assert lines[0].startswith("error: cart.py: commands[0] (str_replace): old_str occurs 0 times")
    assert lines[1:5] == [
        "expected lines (3), not found in cart.py:",
        "   | def total(prices):",
        "   |     subtotal = sum(prices)",
        "   |     return  total",
    ]
    assert lines[5].startswith("nearest lines in cart.py (lines 9-15; 2 of 3 expected lines")
    assert "12 |     subtotal = sum(prices)" in lines


def test_a_patch_already_applied_says_so_and_where(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"cart.py": CART})
    patch = (
        "*** Begin Patch\n*** Update File: cart.py\n@@ def total(prices):\n"
        "     subtotal = sum(prices)\n-    return subtotal\n+    return round(subtotal, 2)\n"
        "*** End Patch\n"
    )
    assert apply(repo, patch).returncode == 0
    head = repo.head()
    again = apply(repo, patch, "--attempt", "2")  # a new call: the lines it expects are gone
    assert again.returncode == 1
    first, *rest = again.stderr.split("\n")
    assert first == (
        "error: cart.py: hunk 1: expected lines not found (first: '    subtotal = sum(prices)'); "
        "its new lines are already at cart.py:12 — was this patch applied already?; re-read the "
        "file: if the change is there, do not send it again; otherwise send a patch whose context "
        "lines match the file"
    )
    assert "cart.py, lines 10-15, with the new lines at line 12:" in rest
    assert "13 |     return round(subtotal, 2)" in rest
    assert repo.head() == head


def test_a_str_replace_already_applied_says_where(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"cart.py": CART})
    edit = orjson.dumps(
        [
            {
                "command": "str_replace",
                "path": "cart.py",
                "old_str": "    return total\n",
                "new_str": "    return subtotal\n",
            }
        ]
    ).decode()
    result = apply(repo, edit)
    assert result.returncode == 1
    assert (
        "its new_str is already at cart.py:13 — was this edit applied already?"
        in (result.stderr.split("\n")[0])
    )


def test_the_nearest_region_stays_linear_on_a_large_file() -> None:
    # 200,000 lines of the hunk's own lines over and over: comparing the hunk at every place
    # would take 200,000 x 40 line comparisons; voting takes a few per line.
    block = [f"    value_{k} = compute({k})" for k in range(40)]
    bodies = block * 5000
    expected = [*block[:20], "    missing = 1", *block[20:]]
    from applyonce.patch.repair import repair_details

    start = time.perf_counter()
    details = repair_details(bodies, expected, near=100_000)
    elapsed = time.perf_counter() - start
    assert details["region_equal"] == 20  # the lines before the missing one (or after it)
    assert len(details["region"]) == 20
    assert details["region_start"] in (99_999, 100_019)  # the best window nearest the anchor
    assert elapsed < 2.0, elapsed  # generous: about 0.4 s here; file x hunk is 8 million compares


def test_the_whole_rejection_of_a_large_file_carries_the_region() -> None:
    block = [f"    value_{k} = compute({k})" for k in range(40)]
    data = ("\n".join(block * 500) + "\n").encode()
    patch = parse(
        "*** Begin Patch\n*** Update File: big.py\n@@\n"
        + "".join(f" {line}\n" for line in block[:20])
        + "-    missing = 1\n+    changed = 2\n*** End Patch\n",
        "codex",
    )
    [update] = patch.operations
    with pytest.raises(HunkApplyError) as info:
        apply_hunks(data, update.hunks, path="big.py")  # type: ignore[union-attr]
    assert info.value.details["region_start"] == 1 and info.value.details["region_equal"] == 20
