"""The Codex apply_patch scenarios, read from ../shared/conformance/codex/scenarios (never copied).

Each scenario: commit input/ as the base of a fresh repo, run the real ``applyonce apply`` on
patch.txt against the checked-out branch, then compare the checkout to expected/. A scenario that
changes files must land as exactly one commit carrying a Call-Id; one that fails must add none.

Deliberate differences, each refused with nothing changed and exit status 1:

* 015 (a later file fails after an earlier one succeeded): Codex leaves the first file written;
  applyonce is atomic.
* 010 and 011 (``Move to`` and ``Add File`` onto a file that exists): Codex overwrites it; applyonce
  never overwrites by surprise (``already-exists``, with a hint to update the file instead).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import make_repo, run_cli, snapshot

ATOMIC_DIFFERENCE = {"015_failure_after_partial_success_leaves_changes"}
NO_OVERWRITE_DIFFERENCE = {
    "010_move_overwrites_existing_destination",
    "011_add_overwrites_existing_file",
}


def _scenarios_dir() -> Path | None:
    configured = os.environ.get("APPLYONCE_CODEX_SCENARIOS")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared/conformance/codex/scenarios")
    return next((c for c in candidates if c.is_dir()), None)


SCENARIOS = _scenarios_dir()
NAMES = sorted(p.name for p in SCENARIOS.iterdir() if p.is_dir()) if SCENARIOS else []


def test_conformance_suite_is_present_when_required() -> None:
    if SCENARIOS is None:
        if os.environ.get("APPLYONCE_REQUIRE_CONFORMANCE"):
            pytest.fail("APPLYONCE_REQUIRE_CONFORMANCE is set but the Codex scenarios are missing")
        pytest.skip("../shared/conformance/codex/scenarios is not here")
    assert len(NAMES) >= 25


@pytest.mark.skipif(SCENARIOS is None, reason="Codex scenarios not present")
@pytest.mark.parametrize("name", NAMES)
def test_codex_scenario(name: str, tmp_path: Path) -> None:
    assert SCENARIOS is not None
    scenario = SCENARIOS / name
    before = snapshot(scenario / "input") if (scenario / "input").is_dir() else {}
    expected = snapshot(scenario / "expected")
    repo = make_repo(tmp_path / "repo", before)
    base = repo.head()

    result = run_cli("apply", str(scenario / "patch.txt"), "--repo", str(repo.path))

    if name in ATOMIC_DIFFERENCE | NO_OVERWRITE_DIFFERENCE:
        expected = before
    if expected == before:
        assert result.returncode == 1, result
        # One error line; a hunk that is not found adds its repair data on the lines after it.
        assert result.stderr.startswith("error: "), result.stderr
        assert result.stderr.count("\n") == 1 or "expected lines not found" in result.stderr
        assert repo.head() == base
        if name in NO_OVERWRITE_DIFFERENCE:
            assert "it already exists; " in result.stderr, result.stderr
    else:
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("Success. Updated the following files:\n")
        assert repo.git("rev-parse", "HEAD~1").strip() == base
        assert len(repo.call_ids()) == 1
    assert repo.files() == expected
    assert repo.git("status", "--porcelain") == ""
