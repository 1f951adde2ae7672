"""Lanes over MCP (the official client, the real server over stdio): ``apply_patch`` with
``lane`` commits to ``agent/NAME``, ``land_lane`` lands it onto the target exactly once, a lane
that no longer applies is a tool error saying at which call, why and what to do, and bad
arguments are one line that writes nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp import ClientSession

from applyonce.adapters.mcp_server import land_text
from applyonce.adapters.results import BlockedLane, LandResult
from tests.adapters.test_mcp_truth import _FLAG
from tests.conftest import Repo
from tests.support.mcp_session import PATCH, SUCCESS, text_of, with_session

CONFLICTING = PATCH.replace("VALUE = 2", "VALUE = 3")


def _refs(repo: Repo) -> str:
    return repo.git("for-each-ref", "--format=%(refname) %(objectname)")


def test_apply_on_a_lane_then_land_it_once_and_a_blocked_lane_is_an_error(
    repo: Repo, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}
    main_before = repo.head()

    async def scenario(session: ClientSession) -> None:
        seen["a"] = await session.call_tool("apply_patch", {"patch": PATCH, "lane": "a"})
        seen["b"] = await session.call_tool("apply_patch", {"patch": CONFLICTING, "lane": "b"})
        seen["main_after_lanes"] = repo.head()
        seen["land"] = await session.call_tool("land_lane", {"lane": "a"})
        seen["again"] = await session.call_tool("land_lane", {"lane": "a"})
        seen["blocked"] = await session.call_tool("land_lane", {"all": True})

    with_session(repo, tmp_path / "server.err", scenario)
    # The lane calls committed to their lanes, from main's tip; main did not move.
    assert text_of(seen["a"]) == SUCCESS and seen["a"].is_error is False
    lane_a = repo.git("rev-parse", "refs/heads/agent/a").strip()
    assert seen["a"].structured_content["commit"] == lane_a
    assert repo.git("rev-parse", "agent/a^").strip() == main_before
    assert repo.git("rev-parse", "agent/b^").strip() == main_before
    assert seen["main_after_lanes"] == main_before

    land = seen["land"]
    assert land.is_error is False
    structured = land.structured_content
    [done] = structured["landed"]
    call_a = seen["a"].structured_content["call_id"]
    assert done["call_id"] == call_a and done["lane_commit"] == lane_a
    assert done["lane"] == "refs/heads/agent/a" and done["commit"] == repo.head()
    assert structured["target"] == "refs/heads/main" and structured["blocked"] == []
    assert structured["exit_code"] == 0 and structured["error"] is None
    assert text_of(land) == (
        f"landed: call {call_a[:12]} of agent/a as commit {repo.head()[:12]} on main\n"
        "1 landed on main, 0 already there, 0 lane(s) blocked\n"
    )
    trailers = repo.git("log", "-1", "--format=%(trailers:only)", "main")
    assert f"Lands-Call-Id: {call_a}" in trailers and f"Lane-Commit: {lane_a}" in trailers
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"

    # Landing again lands nothing new: the landing is the same call.
    again = seen["again"]
    assert again.is_error is False
    assert again.structured_content["landed"] == [] and again.structured_content["already"] == 1
    assert text_of(again) == "0 landed on main, 1 already there, 0 lane(s) blocked\n"
    assert repo.git("rev-list", "--count", f"{main_before}..main").strip() == "1"

    # Lane b changed the same line: it is blocked, and says so as an error, in tool terms.
    blocked = seen["blocked"]
    assert blocked.is_error is True
    report = blocked.structured_content
    assert report["landed"] == [] and report["already"] == 1
    [stop] = report["blocked"]
    call_b = seen["b"].structured_content["call_id"]
    assert stop["lane"] == "refs/heads/agent/b" and stop["call_id"] == call_b
    assert stop["kind"] == "hunk-mismatch" and stop["waiting"] == 0
    assert report["exit_code"] == stop["exit_code"] == 1
    text = text_of(blocked)
    assert text.startswith(f"error: lane agent/b is blocked at call {call_b[:12]}: ")
    assert "(hunk-mismatch); 0 later call(s) of the lane wait\n" in text
    assert f"\nhint: {stop['hint']}\n" in text
    assert "\n     | VALUE = 1\n" in text and "\n   1 | VALUE = 2\n" in text  # the repair data
    assert (
        "\nnext: lane agent/b stays blocked until main changes: make this change on main "
        "(apply_patch without lane), or undo what it conflicts with there, then call land_lane "
        "again; it is tried again on main's new tip\n"
    ) in text
    assert "applyonce land" not in text and not _FLAG.search(text)
    assert text.endswith("0 landed on main, 1 already there, 1 lane(s) blocked\n")
    assert repo.git("show", "main:src/util.py") == "VALUE = 2\n"  # nothing landed from b


def test_bad_land_and_lane_arguments_are_one_line_and_write_nothing(
    repo: Repo, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}
    before = _refs(repo)
    files = repo.files()
    cases: dict[str, tuple[str, dict[str, Any]]] = {
        "neither": ("land_lane", {}),
        "both": ("land_lane", {"lane": "a", "all": True}),
        "bad-name": ("land_lane", {"lane": "a b"}),
        "extra": ("land_lane", {"lane": "a", "force": True}),
        "no-lane": ("land_lane", {"lane": "nobody"}),
        "no-target": ("land_lane", {"all": True, "onto": "nowhere"}),
        "apply-bad-lane": ("apply_patch", {"patch": PATCH, "lane": "../x"}),
        "apply-lane-type": ("apply_patch", {"patch": PATCH, "lane": 7}),
    }

    async def scenario(session: ClientSession) -> None:
        for name, (tool, arguments) in cases.items():
            seen[name] = await session.call_tool(tool, arguments)

    with_session(repo, tmp_path / "server.err", scenario)
    expected = {
        "neither": "error: land_lane needs one of lane or all; pass lane: NAME, or all: true "
        "for every lane\n",
        "both": "error: land_lane needs one of lane or all; pass lane: NAME, or all: true "
        "for every lane\n",
        "no-lane": "error: there is no lane 'nobody' (branch agent/nobody); make a call with "
        "lane: NAME first\n",
    }
    for name, result in seen.items():
        text = text_of(result)
        assert result.is_error is True, name
        assert text.startswith("error: ") and text.count("\n") == 1, (name, text)
        assert not _FLAG.search(text), (name, text)
        error = result.structured_content["error"]
        assert error is not None and error["message"], name
        if name in expected:
            assert text == expected[name], name
    for name in ("neither", "both", "bad-name", "extra"):
        assert seen[name].structured_content["error"]["kind"] == "usage", name
        assert seen[name].structured_content["exit_code"] == 2, name
    assert "bad arguments for land_lane: lane:" in text_of(seen["bad-name"])
    assert "bad arguments for land_lane: force:" in text_of(seen["extra"])
    assert "bad arguments for apply_patch: lane:" in text_of(seen["apply-bad-lane"])
    assert "bad arguments for apply_patch: lane:" in text_of(seen["apply-lane-type"])
    assert text_of(seen["no-target"]) == (
        "error: there is no branch 'nowhere' to land on; pass onto: BRANCH naming an existing "
        "branch\n"
    )
    # Nothing written: no ref, no file, no receipt.
    assert _refs(repo) == before
    assert repo.files() == files
    assert repo.call_ids() == []


def test_a_dry_run_on_a_lane_plans_on_its_tip_and_makes_no_lane(repo: Repo, tmp_path: Path) -> None:
    seen: dict[str, Any] = {}
    again = PATCH.replace("-VALUE = 1\n+VALUE = 2", "-VALUE = 2\n+VALUE = 4")
    blocks = "<<<<<<< SEARCH\nVALUE = 2\n=======\nVALUE = 5\n>>>>>>> REPLACE\n"

    async def scenario(session: ClientSession) -> None:
        seen["new"] = await session.call_tool(
            "apply_patch", {"patch": PATCH, "lane": "c", "dry_run": True}
        )
        seen["refs_after_dry_run"] = _refs(repo)
        seen["apply"] = await session.call_tool("apply_patch", {"patch": PATCH, "lane": "c"})
        seen["on_tip"] = await session.call_tool(
            "apply_patch", {"patch": again, "lane": "c", "dry_run": True}
        )
        seen["replace"] = await session.call_tool(
            "replace_in_file", {"path": "src/util.py", "diff": blocks, "lane": "c"}
        )

    before = _refs(repo)
    main = repo.head()
    with_session(repo, tmp_path / "server.err", scenario, "--search-replace")
    # Planned on main (the lane does not exist yet), and the lane was not made.
    assert seen["new"].is_error is False
    assert seen["new"].structured_content["status"] == "dry-run"
    assert seen["refs_after_dry_run"] == before
    # Once it exists, a dry run plans on the lane's tip: VALUE = 2 is there, not on main.
    assert seen["on_tip"].is_error is False, text_of(seen["on_tip"])
    assert "on refs/heads/agent/c" in text_of(seen["on_tip"])
    # replace_in_file takes the lane too: its commit is on the lane, main did not move.
    assert seen["replace"].is_error is False, text_of(seen["replace"])
    lane_tip = repo.git("rev-parse", "refs/heads/agent/c").strip()
    assert seen["replace"].structured_content["commit"] == lane_tip
    assert repo.git("show", "agent/c:src/util.py") == "VALUE = 5\n"
    assert repo.head() == main


def _blocked(exit_code: int, call_id: str | None = "c" * 64) -> LandResult:
    stop = BlockedLane(
        lane="refs/heads/agent/x",
        call_id=call_id,
        lane_commit="d" * 40,
        landing_call_id=None,
        kind="busy",
        message="held",
        hint=None,
        output="",
        waiting=2,
        exit_code=exit_code,
    )
    return LandResult(
        target="refs/heads/main", landed=[], blocked=[stop], already=0, exit_code=exit_code
    )


def test_what_to_do_next_follows_how_the_lane_was_stopped() -> None:
    def next_line(result: LandResult) -> str:
        [line] = [line for line in land_text(result).splitlines() if line.startswith("next: ")]
        return line

    assert next_line(_blocked(4)) == (
        "next: call land_lane again: the landing was held by another process or main kept "
        "moving; nothing of this lane call landed"
    )
    assert next_line(_blocked(5)) == (
        "next: whether this landing took effect cannot be told now: run 'applyonce recover' in "
        "the repository, then call land_lane again"
    )
    assert next_line(_blocked(1, call_id=None)) == (
        "next: lane agent/x stays blocked until that commit is off it"
    )
    text = land_text(_blocked(4))
    assert text.startswith(
        f"error: lane agent/x is blocked at call {'c' * 12}: held (busy); 2 later call(s) of "
        "the lane wait\n"
    )
