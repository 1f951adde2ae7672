"""The crash matrix of test_recovery.py with the repository's commit hooks on: a real SIGKILL at
every fault point of a call, then recover, then the call again — exactly one commit, its message
as the hooks worded it, the Call-Id block last (docs/design.md §7)."""

from __future__ import annotations

import signal

import orjson
import pytest

from tests.conftest import Repo, git_trailers, run_cli
from tests.e2e.crash.test_recovery import COMMIT_POINTS, apply, crash_recover_repeat
from tests.e2e.support import assert_invariants

# A check that passes this patch, a subject prefix, a trailer after applyonce's block.
HOOKS = {
    "pre-commit": "#!/bin/sh\nif git diff --cached | grep -q FIXME; then exit 1; fi\n",
    "prepare-commit-msg": "#!/bin/sh\nsed -i '1s/^/[OPS-7] /' \"$1\"\n",
    "commit-msg": "#!/bin/sh\nprintf '\\nChange-Id: I0123456789abcdef\\n' >> \"$1\"\n",
}


def install_hooks(repo: Repo) -> None:
    hooks = repo.path / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    for name, text in HOOKS.items():
        (hooks / name).write_text(text)
        (hooks / name).chmod(0o755)


def trailer_keys(message: str) -> list[str]:
    return [key for key, _ in git_trailers(message)]


# .ci/run kills at one point in six, others at the next commits (tests/conftest.py).
@pytest.mark.sampled(every=6)
@pytest.mark.parametrize("point", COMMIT_POINTS)
def test_crash_with_hooks_at_fault_point_then_recover_then_repeat(repo: Repo, point: str) -> None:
    install_hooks(repo)
    receipt = crash_recover_repeat(repo, point)
    message = repo.git("log", "-1", "--format=%B")
    assert message.startswith("[OPS-7] apply_patch: ")
    keys = trailer_keys(message)
    assert keys[:2] == ["Change-Id", "Call-Id"] and keys[-1] == "Args-Sha256"
    assert repo.call_ids() == [receipt["call_id"]]


def test_a_hook_refusal_crashed_while_recorded_is_settled_once(repo: Repo) -> None:
    install_hooks(repo)
    base = repo.head()
    bad = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2  # FIXME\n"
        "*** End Patch\n"
    )
    crashed = apply(repo, bad, env={"APPLYONCE_FAULT": "after-reject-receipt-tmp"})
    assert crashed.returncode == -signal.SIGKILL
    assert run_cli("recover", "--repo", str(repo.path)).returncode == 0
    again = apply(repo, bad)
    assert again.returncode == 1
    receipt = orjson.loads(again.stdout)
    assert receipt["error"]["kind"] == "hook-failed"
    assert_invariants(repo, base, receipt["call_id"], committed=False)
