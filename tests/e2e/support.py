"""Helpers shared by the end-to-end tests: the three-file patch and the invariants a crashed call
must keep (docs/design.md §7), a call through a shared remote and what the server's branch holds."""

from __future__ import annotations

import orjson

from tests.conftest import Repo, Run, Served, run_cli

THREE_FILE_PATCH = """*** Begin Patch
*** Update File: src/util.py
@@
-VALUE = 1
+VALUE = 2
*** Add File: docs/notes.md
+notes
*** Delete File: README.md
*** End Patch
"""


def assert_invariants(repo: Repo, base: str, call_id: str, *, committed: bool) -> None:
    """docs/design.md §7, checked from the outside with git and the CLI."""
    carrying = [c for c in repo.call_ids() if c == call_id]
    assert len(carrying) == (1 if committed else 0)
    # Fast-forward only: the base is an ancestor of the tip, no merges.
    assert repo.git("merge-base", "--is-ancestor", base, "HEAD", check=False) == ""
    assert repo.git("rev-list", "--merges", "HEAD") == ""
    shown = run_cli("show", call_id, "--repo", str(repo.path), "--json")
    assert shown.returncode == 0, shown.stderr
    receipt = orjson.loads(shown.stdout)
    assert receipt["status"] == ("committed" if committed else "rejected")
    if committed:
        assert receipt["commit"] == repo.head()
        for record in receipt["files"]:
            if record["blob"] is not None:
                assert record["blob"] == repo.git("rev-parse", f"HEAD:{record['path']}").strip()
    log = orjson.loads(run_cli("log", "--repo", str(repo.path), "--json").stdout)
    states = [row["state"] for row in log if row["call_id"] == call_id]
    assert states == [receipt["status"]]
    assert repo.git("fsck", "--strict", "--no-dangling") == ""
    leftovers = [
        p
        for p in repo.path.joinpath(".git").rglob("*")
        if (p.name.endswith(".lock") and "applyonce" not in p.parts)
        or p.name.startswith(".applyonce-tmp-")
    ]
    assert leftovers == []
    assert repo.git("status", "--porcelain") == ""
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 0, audit.stdout
    replay = run_cli("replay", "--repo", str(repo.path))
    assert replay.returncode == 0, replay.stdout


def apply_remote(clone: Repo, patch: str, *args: str, env: dict[str, str] | None = None) -> Run:
    return run_cli(
        "apply", "-", "--repo", str(clone.path), "--remote", "origin", *args, input=patch, env=env
    )


def server_calls(served: Served) -> list[str]:
    """The Call-Id of every commit on the server's main, newest first."""
    out = served.server_git("log", "--format=%(trailers:key=Call-Id,valueonly)", "main")
    return [line.strip() for line in out.splitlines() if line.strip()]


def assert_linear(served: Served) -> None:
    assert served.server_git("rev-list", "--merges", "main").strip() == ""
    served.server_git("fsck", "--strict")
