"""Calls in a shallow clone (``git clone --depth N``): one Call-Id is never published twice.

A call that landed before the clone was made is below its shallow boundary. With ``--remote`` the
clone is made complete from the remote before the Call-Id search, so the call is found and
adopted, not landed again; without it the call is refused (exit 4, nothing written) with the
command that deepens the clone, and once deepened it is found.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import Repo, Served, apply, make_repo, run_cli
from tests.flow.test_remote_publish import apply_remote, assert_linear, server_calls

# Appends a line after an anchor that stays: it applies again on a tip that has it, so only
# exactly-once stops a second copy.
APPEND = "*** Begin Patch\n*** Update File: README.md\n@@\n # demo\n+added\n*** End Patch\n"


def shallow_clone(url: str, into: Path) -> Repo:
    subprocess.run(["git", "clone", "-q", "--depth", "1", url, str(into)], check=True)
    return Repo(into)


def _land_then_move_on(served: Served) -> str:
    """The call lands from the first clone; then another commit goes on top of it."""
    first = apply_remote(served.clone, APPEND, "--json")
    assert first.returncode == 0, first.stderr
    (served.clone.path / "later.txt").write_text("later\n")
    served.clone.git("add", "later.txt")
    served.clone.git("commit", "-q", "-m", "later")
    served.clone.git("push", "-q", "origin", "main")
    return str(json.loads(first.stdout)["call_id"])


def test_a_shallow_clone_adopts_a_call_landed_below_its_boundary(
    served: Served, tmp_path: Path
) -> None:
    call_id = _land_then_move_on(served)
    clone = shallow_clone(served.url, tmp_path / "shallow")
    again = apply_remote(clone, APPEND, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["replayed"] is True
    assert server_calls(served) == [call_id]  # once, never twice
    assert_linear(served)
    assert (clone.path / "README.md").read_text() == "# demo\nadded\n"


def test_a_deepened_shallow_clone_adopts_it_too(served: Served, tmp_path: Path) -> None:
    call_id = _land_then_move_on(served)
    clone = shallow_clone(served.url, tmp_path / "shallow")
    clone.git("fetch", "-q", "--deepen", "1")
    again = apply_remote(clone, APPEND, "--json")
    assert again.returncode == 0, again.stderr
    assert server_calls(served) == [call_id]
    recovered = run_cli("recover", "--repo", str(clone.path), "--remote", "origin")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    audited = run_cli("audit", "--repo", str(clone.path), "--remote", "origin")
    assert audited.returncode == 0, audited.stdout + audited.stderr


def test_a_call_in_a_shallow_clone_without_a_remote_is_refused_until_it_is_deepened(
    tmp_path: Path,
) -> None:
    origin = make_repo(tmp_path / "origin", {"README.md": "# demo\n"})
    first = apply(origin, APPEND, "--json")
    assert first.returncode == 0, first.stderr
    call_id = json.loads(first.stdout)["call_id"]
    (origin.path / "later.txt").write_text("later\n")
    origin.git("add", "later.txt")
    origin.git("commit", "-q", "-m", "later")
    clone = shallow_clone(f"file://{origin.path}", tmp_path / "shallow")
    refs, files = clone.git("for-each-ref"), clone.files()
    refused = apply(clone, APPEND, "--json")
    assert refused.returncode == 4, refused.stdout + refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["kind"] == "history-incomplete"
    assert "shallow clone" in error["message"] and "git fetch --unshallow" in error["hint"]
    line = refused.stderr.strip()
    assert line.startswith("error: ") and len(line.splitlines()) == 1
    assert "Traceback" not in refused.stderr
    # Nothing written: no commit, no record, the checkout and every ref as they were.
    assert (clone.git("for-each-ref"), clone.files()) == (refs, files)
    assert not clone.state_dir().exists()
    clone.git("fetch", "-q", "--unshallow")
    again = apply(clone, APPEND, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["replayed"] is True
    assert clone.call_ids() == [call_id]


def test_recover_leaves_a_call_in_flight_when_its_history_is_cut_short(tmp_path: Path) -> None:
    """A call killed in flight, then its clone made shallow above the call's base (a 'git fetch
    --depth 1' of newer commits, and the branch reset to them): where the call would be is not
    here, so recover neither settles it "rejected, nothing took effect" nor anything else; it
    says how to deepen, exits 4, and settles it once the history is whole."""
    origin = make_repo(tmp_path / "origin", {"README.md": "# demo\n"})
    clone = Repo(tmp_path / "clone")
    subprocess.run(["git", "clone", "-q", f"file://{origin.path}", str(clone.path)], check=True)
    killed = apply(clone, APPEND, env={"APPLYONCE_FAULT": "after-prepared"})
    assert killed.returncode == -9
    (origin.path / "later.txt").write_text("later\n")
    origin.git("add", "later.txt")
    origin.git("commit", "-q", "-m", "later")
    clone.git("fetch", "-q", "--depth", "1", "origin")
    clone.git("reset", "-q", "--hard", "origin/main")
    left = run_cli("recover", "--repo", str(clone.path), "--json")
    assert left.returncode == 4, left.stdout + left.stderr
    [outcome] = json.loads(left.stdout)["outcomes"]
    assert outcome["was"] == outcome["now"] == "prepared"
    assert "shallow clone" in outcome["why"] and "git fetch --unshallow" in outcome["why"]
    clone.git("fetch", "-q", "--unshallow")
    settled = run_cli("recover", "--repo", str(clone.path), "--json")
    assert settled.returncode == 0, settled.stdout + settled.stderr
    [outcome] = json.loads(settled.stdout)["outcomes"]
    assert outcome["now"] == "rejected"  # killed before its publish: nothing took effect
