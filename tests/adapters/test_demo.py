"""The demo runs end to end on a scratch repo."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import run_cli


def test_demo_runs_end_to_end_outside_the_source_tree(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = run_cli("demo", "--into", str(target), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "killed by SIGKILL at after-publish" in out
    assert re.search(r"prepared\s+committed\s+commit [0-9a-f]{12} is on refs/heads/main", out)
    assert "settled by recover earlier; returned, not applied again" in out
    assert "replayed: the stored receipt, nothing ran" in out
    assert "rejected, exit 1: error: src/shop/cart.py: hunk 1" in out
    assert "audited 2 Call-Id commit(s) on refs/heads/main and 3 receipt(s): clean" in out
    counts = re.findall(r"commits carrying Call-Id [0-9a-f]{12}: (\d+)", out)
    assert counts == ["1", "1", "1"]
    assert out.rstrip().endswith(
        f"every step behaved as promised; the scratch repo stays at {target}"
    )
    assert (target / ".git").is_dir()


def test_demo_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    (tmp_path / "x").write_text("x")
    result = run_cli("demo", "--into", str(tmp_path))
    assert result.returncode == 2 and result.stderr.startswith("error: ")
    assert not (tmp_path / ".git").exists()
