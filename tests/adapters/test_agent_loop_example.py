"""examples/agent_loop.py runs as a real process against a repository: both API shapes, a
success, a failure with repair data, the fix, and a retried turn that commits nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from applyonce import Executor
from tests.conftest import Repo, make_repo

EXAMPLE = Path(__file__).parents[2] / "examples" / "agent_loop.py"
ROUNDED = "def total(prices):\n    return round(sum(prices), 2)\n"


def run_example(repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), str(repo.path), *args],
        cwd=repo.path.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def shop(tmp_path: Path) -> Repo:
    return make_repo(tmp_path / "shop", {"README.md": "# shop\n"})


def test_both_shapes_commit_once_per_change(shop: Repo) -> None:
    base = shop.head()
    done = run_example(shop)
    assert done.returncode == 0, done.stderr
    subjects = shop.git("log", "--format=%s", f"{base}..").splitlines()
    assert subjects == [
        "apply_patch: M cart_anthropic.py",
        "apply_patch: A cart_anthropic.py",
        "apply_patch: M cart_openai.py",
        "apply_patch: A cart_openai.py",
    ]
    for api in ("openai", "anthropic"):
        assert (shop.path / f"cart_{api}.py").read_text() == ROUNDED
        out = done.stdout.split(f"--- {api}, ", 1)[1]
        # The failure the model read carries the repair data: the file's numbered lines.
        assert "expected lines not found" in out and " 2 |     return sum(prices)\n" in out
        assert "the same turn, retried by the harness\n" in out
    assert "--- anthropic, turn 2 (is_error)\n" in done.stdout
    assert shop.git("status", "--porcelain") == ""
    # Every call is on record under the model's tool-call ID: the four commits, the two
    # rejections; the retried turn made no call of its own.
    with Executor(shop.path) as executor:
        calls = executor.calls()
        assert sorted(c.state for c in calls) == ["committed"] * 4 + ["rejected"] * 2
        ids = {executor.show(c.call_id).tool_call_id for c in calls}
    assert ids == {
        "call_1_0",
        "call_2_0",
        "call_4_0",
        "toolu_call_1_0",
        "toolu_call_2_0",
        "toolu_call_4_0",
    }


def test_one_shape_alone(shop: Repo) -> None:
    done = run_example(shop, "--api", "anthropic")
    assert done.returncode == 0, done.stderr
    assert "--- openai" not in done.stdout
    assert not (shop.path / "cart_openai.py").exists()
    assert (shop.path / "cart_anthropic.py").read_text() == ROUNDED
    assert shop.commit_count() == 3
