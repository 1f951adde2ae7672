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

import pytest

from tests.conftest import Repo, Served, apply, make_repo, run_cli
from tests.e2e.support import apply_remote, assert_linear, server_calls

pytestmark = pytest.mark.sampled(every=2, by="module")

# Its tests that use ``served`` run over git daemon, then over smart HTTP (nginx, basic
# authentication): tests/e2e/fleet/conftest.py.
OVER_EACH_SERVER = True

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


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_audit_of_a_clone_made_shallow_says_so_and_how_to_make_it_complete(
    tmp_path: Path,
) -> None:
    """Calls made, then the clone made shallow ('git fetch --depth=1', as a CI cache does):
    their commits are all on the branch, below the boundary. Audit reported them as problems
    ("unreachable … re-apply as a new attempt", a "mismatch" for the commit at the boundary)
    that recover could not clear. It is refused instead (exit 4, nothing written), saying the
    history is incomplete and how to make it complete; once complete it is clean."""
    seed = make_repo(tmp_path / "seed", {"README.md": "# demo\n"})
    subprocess.run(
        ["git", "clone", "-q", "--bare", str(seed.path), str(tmp_path / "o.git")], check=True
    )
    clone = Repo(tmp_path / "clone")
    subprocess.run(
        ["git", "clone", "-q", f"file://{tmp_path / 'o.git'}", str(clone.path)], check=True
    )
    for name in ("a", "b", "c"):
        added = f"*** Begin Patch\n*** Add File: {name}.txt\n+{name}\n*** End Patch\n"
        assert apply_remote(clone, added).returncode == 0
    clone.git("fetch", "-q", "--depth=1", "origin")
    assert (clone.path / ".git" / "shallow").is_file()
    before = (clone.git("for-each-ref"), _tree_bytes(clone.path))

    audited = run_cli("audit", "--repo", str(clone.path))
    assert audited.returncode == 4, audited.stdout + audited.stderr
    assert audited.stdout == ""
    assert audited.stderr == (
        "error: the history of refs/heads/main is incomplete here (a shallow clone: the parents "
        f"of {clone.head()[:12]} are missing), so its calls cannot all be checked; make the "
        "clone complete ('git fetch --unshallow'; or pass --remote NAME, which deepens it from "
        "that remote), then repeat\n"
    )
    assert "new attempt" not in audited.stderr and "recover" not in audited.stderr
    as_json = run_cli("audit", "--repo", str(clone.path), "--json")
    assert as_json.returncode == 4
    assert json.loads(as_json.stdout)["error"]["kind"] == "history-incomplete"
    assert (clone.git("for-each-ref"), _tree_bytes(clone.path)) == before

    # Only the commits after --since: all here, so that much is audited.
    since = run_cli("audit", "--repo", str(clone.path), "--since", "HEAD")
    assert since.returncode == 0 and since.stdout.endswith(": clean\n"), since.stdout + since.stderr

    # With --remote, the clone is deepened from it first.
    remote = run_cli("audit", "--repo", str(clone.path), "--remote", "origin")
    assert remote.returncode == 0, remote.stdout + remote.stderr
    assert (
        remote.stdout == "audited 3 Call-Id commit(s) on refs/heads/main and 3 receipt(s): clean\n"
    )
    # And the command the refusal gives makes it complete too.
    clone.git("fetch", "-q", "--depth=1", "origin")
    assert run_cli("audit", "--repo", str(clone.path)).returncode == 4
    clone.git("fetch", "-q", "--unshallow")
    whole = run_cli("audit", "--repo", str(clone.path))
    assert whole.returncode == 0 and whole.stdout == remote.stdout, whole.stdout + whole.stderr
