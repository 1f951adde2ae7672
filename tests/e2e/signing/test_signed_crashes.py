"""Exactly-once for signed calls (docs/design.md §7): a real SIGKILL at every fault point of a
signed call, then recover, repeat and audit. Recovery adopts or rolls forward the commit the
call signed, as it is: it never signs again (the key is taken away before it runs)."""

from __future__ import annotations

import signal

import orjson
import pytest

from tests.conftest import Repo, run_cli, stored_json
from tests.e2e.crash.test_recovery import COMMIT_POINTS
from tests.e2e.signing.conftest import KeysOf
from tests.e2e.support import THREE_FILE_PATCH, assert_invariants
from tests.support.signing import verify

OUTPUT = "Success. Updated the following files:\nM src/util.py\nA docs/notes.md\nD README.md\n"


def _apply(repo: Repo, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_cli(
        "apply", "-", "--repo", str(repo.path), "--json", *args, input=THREE_FILE_PATCH, env=env
    )


def _dangling_commits(repo: Repo) -> list[str]:
    out = repo.git("fsck", "--unreachable", "--no-reflogs")
    return [line.split()[2] for line in out.splitlines() if line.startswith("unreachable commit")]


# .ci/run kills at one point in six per format, others at the next commits (tests/conftest.py).
@pytest.mark.sampled(every=6, by="fmt")
@pytest.mark.parametrize("point", COMMIT_POINTS)
@pytest.mark.parametrize("fmt", ["ssh", "openpgp"])
def test_a_signed_call_killed_at_any_point_lands_once_signed(
    repo: Repo, keys_of: KeysOf, fmt: str, point: str
) -> None:
    keys = keys_of(fmt)
    keys.configure(repo)
    base = repo.head()
    crashed = _apply(repo, env={"APPLYONCE_FAULT": point})
    assert crashed.returncode == -signal.SIGKILL
    published = repo.head() != base
    # Whatever the call left, nothing may be signed again: the key is gone.
    repo.git("config", "user.signingKey", "/nonexistent/key.pub")
    repo.git("config", "gpg.program", "/nonexistent/gpg")
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    repo.git("config", "user.signingKey", keys.config["user.signingKey"])
    repo.git("config", "--unset", "gpg.program")  # (git verify-commit runs it too)
    if published or point == "after-commit-object":
        # Landed (or rolled forward): the signed commit, as the call made it.
        assert repo.head() != base
        assert verify(repo).returncode == 0
    again = _apply(repo)
    assert again.returncode == 0, again.stdout + again.stderr
    receipt = orjson.loads(again.stdout)
    assert receipt["output"] == OUTPUT
    assert receipt["signature"] == {"format": fmt, "key": keys.key}
    assert verify(repo).returncode == 0
    assert_invariants(repo, base, receipt["call_id"], committed=True)
    head = repo.head()
    third = _apply(repo)
    assert stored_json(third.stdout) == stored_json(again.stdout)
    assert repo.head() == head


@pytest.mark.parametrize("point", ["after-commit-object", "after-publish"])
def test_recover_keeps_the_signed_commit_and_records_its_signature(
    repo: Repo, keys_of: KeysOf, point: str
) -> None:
    keys = keys_of("openpgp")
    keys.configure(repo)
    assert _apply(repo, env={"APPLYONCE_FAULT": point}).returncode == -signal.SIGKILL
    # The signed commit the call made: on the branch, or an object the branch does not reach.
    landed = repo.head() if point == "after-publish" else _dangling_commits(repo)[0]
    assert "gpgsig " in repo.git("cat-file", "commit", landed)
    repo.git("config", "--unset", "user.signingKey")
    repo.git("config", "gpg.program", "/nonexistent/gpg")  # a re-sign would fail
    recovered = run_cli("recover", "--repo", str(repo.path))
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    head = repo.head()
    assert head == landed  # adopted, or rolled forward: that very object
    repo.git("config", "--unset", "gpg.program")
    assert verify(repo).returncode == 0
    shown = orjson.loads(
        run_cli("show", repo.call_ids()[0], "--repo", str(repo.path), "--json").stdout
    )
    assert shown["commit"] == head
    assert shown["reconciled"] is True
    assert shown["signature"] == {"format": "openpgp", "key": keys.key}
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0
