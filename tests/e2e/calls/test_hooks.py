"""The repository's commit hooks (plain shell hooks) run on every call, on the staged tree in a
scratch checkout, as 'git commit' runs them; --no-verify skips pre-commit and commit-msg."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import orjson
import pytest

from tests.conftest import UTIL_PATCH, Repo, apply, git_trailers, run_cli

# .ci/run: one test in two of this module a commit (the next commit runs the others).
pytestmark = pytest.mark.sampled(every=2, by="module")

BAD_PATCH = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2  # FIXME\n"
    "*** End Patch\n"
)
SPACES_PATCH = (
    "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2   \n"
    "*** Add File: notes.txt\n+tidy   \n*** End Patch\n"
)
# What the hook saw of the repository it ran in, written where the user can read it after.
SPY = """#!/bin/sh
{
  echo "cwd=$(pwd)"
  echo "git_dir=$GIT_DIR"
  echo "index=$GIT_INDEX_FILE"
  echo "editor=$GIT_EDITOR"
  echo "author=$GIT_AUTHOR_NAME <$GIT_AUTHOR_EMAIL>"
  echo "call=$APPLYONCE_CALL_ID"
  echo "head=$(git symbolic-ref HEAD)"
  echo "parent=$(git rev-parse -q --verify HEAD)"
  echo "staged=$(git diff --cached --name-only | tr '\\n' ' ')"
  echo "value=$(cat src/util.py)"
  echo "args=$*"
} >> "$SPY_LOG"
"""
REFUSE_FIXME = """#!/bin/sh
if git diff --cached -U0 | grep -n FIXME; then
  echo "pre-commit: FIXME is not allowed in a commit" >&2
  exit 3
fi
"""
# A fixer, as a pre-commit hook would be one: it rewrites the staged files and stages them.
STRIP_SPACES = """#!/bin/sh
for f in $(git diff --cached --name-only); do
  sed -i 's/[ \\t]*$//' "$f"
  git add "$f"
done
"""
ADD_CHANGE_ID = """#!/bin/sh
printf '\\nChange-Id: I0123456789abcdef\\n' >> "$1"
"""
TICKET_PREFIX = """#!/bin/sh
sed -i '1s/^/[OPS-7] /' "$1"
"""


def install(hooks: Path, name: str, text: str, *, executable: bool = True) -> None:
    hooks.mkdir(parents=True, exist_ok=True)
    path = hooks / name
    path.write_text(text)
    mode = path.stat().st_mode
    path.chmod(mode | stat.S_IXUSR if executable else mode & ~0o111)


def user_state(repo: Repo) -> tuple[object, ...]:
    """Everything of the user's that a call must not touch when it is refused."""
    git_dir = repo.path / ".git"
    return (
        repo.files(),
        (git_dir / "index").read_bytes(),
        repo.git("for-each-ref"),
        (git_dir / "config").read_bytes(),
        sorted(p.name for p in git_dir.iterdir() if p.name != "applyonce"),
    )


def test_hooks_see_the_staged_tree_in_a_scratch_checkout_as_git_commit_runs_them(
    repo: Repo, tmp_path: Path
) -> None:
    spy = tmp_path / "spy.log"
    hooks = repo.path / ".git" / "hooks"
    for name in ("pre-commit", "prepare-commit-msg", "commit-msg"):
        install(hooks, name, SPY.replace("{", f"{{\n  echo hook={name}", 1))
    base = repo.head()
    done = apply(repo, UTIL_PATCH, "--json", env={"SPY_LOG": str(spy)})
    assert done.returncode == 0, done.stderr
    seen = spy.read_text()
    assert [line for line in seen.splitlines() if line.startswith("hook=")] == [
        "hook=pre-commit",
        "hook=prepare-commit-msg",
        "hook=commit-msg",
    ]
    scratch = str(repo.state_dir() / "scratch")
    assert f"cwd={scratch}" in seen and f"git_dir={scratch}" in seen
    assert f"index={scratch}" in seen and "editor=:" in seen
    author = repo.git("log", "-1", "--format=%an <%ae>").strip()
    assert f"author={author}" in seen
    # As during 'git commit': HEAD is the branch at the parent, the patch is staged.
    assert "head=refs/heads/main" in seen and f"parent={base}" in seen
    assert "staged=src/util.py " in seen and "value=VALUE = 2" in seen
    assert "args=.git/COMMIT_EDITMSG message" in seen and "args=.git/COMMIT_EDITMSG\n" in seen
    receipt = orjson.loads(done.stdout)
    assert f"call={receipt['call_id']}" in seen
    names = [c["name"] for c in receipt["checks"]]
    assert names[-3:] == ["hook:pre-commit", "hook:prepare-commit-msg", "hook:commit-msg"]
    assert "no_verify" not in receipt
    assert repo.git("status", "--porcelain") == ""


def test_a_failing_pre_commit_hook_rejects_with_its_output_and_writes_nothing(
    repo: Repo,
) -> None:
    install(repo.path / ".git" / "hooks", "pre-commit", REFUSE_FIXME)
    before = user_state(repo)
    done = apply(repo, BAD_PATCH)
    assert done.returncode == 1
    first, *rest = done.stderr.splitlines()
    assert first == (
        "error: the repository's pre-commit hook refused the commit (exit 3): pre-commit: FIXME is"
        " not allowed in a commit; change the patch so the repository's hook passes (its output"
        " is below), and send it as a new attempt"
    )
    assert rest[0] == "output of the pre-commit hook:"
    assert "+VALUE = 2  # FIXME" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert user_state(repo) == before
    # A repeat returns the stored rejection, byte for byte.
    again = apply(repo, BAD_PATCH, "--json")
    assert again.returncode == 1
    shown = orjson.loads(again.stdout)
    assert shown["output"] == done.stderr
    assert shown["status"] == "rejected" and shown["exit_code"] == 1
    assert shown["error"]["kind"] == "hook-failed" and shown["error"]["hook"] == "pre-commit"
    assert shown["checks"][-1]["name"] == "hook:pre-commit"
    assert shown["checks"][-1]["exit_code"] == 3
    assert user_state(repo) == before


def test_a_pre_commit_hook_that_rewrites_files_fails_the_call_showing_its_diff(
    repo: Repo,
) -> None:
    install(repo.path / ".git" / "hooks", "pre-commit", STRIP_SPACES)
    before = user_state(repo)
    done = apply(repo, SPACES_PATCH, "--json")
    assert done.returncode == 1
    receipt = orjson.loads(done.stdout)
    error = receipt["error"]
    assert error["kind"] == "hook-modified-files"
    assert error["paths"] == ["notes.txt", "src/util.py"]
    assert "-VALUE = 2   \n+VALUE = 2\n" in error["hook_diff"]
    assert "-tidy   \n+tidy\n" in error["hook_diff"]
    assert receipt["output"].startswith(
        "error: the repository's pre-commit hook changed notes.txt, src/util.py instead of"
        " passing; nothing was committed; send a patch that already makes the hook's changes"
        " (its diff is below) as a new attempt\nthe pre-commit hook wanted these changes:\n"
    )
    assert user_state(repo) == before
    # The patch that makes the hook's changes passes it.
    clean = SPACES_PATCH.replace("   \n", "\n")
    assert apply(repo, clean).returncode == 0
    assert repo.git("show", "HEAD:notes.txt") == "tidy\n"


def test_message_hooks_edit_the_message_and_the_call_block_stays_last(repo: Repo) -> None:
    hooks = repo.path / ".git" / "hooks"
    install(hooks, "prepare-commit-msg", TICKET_PREFIX)
    install(hooks, "commit-msg", ADD_CHANGE_ID)
    done = apply(repo, UTIL_PATCH, "--json")
    assert done.returncode == 0, done.stderr
    call_id = orjson.loads(done.stdout)["call_id"]
    message = repo.git("log", "-1", "--format=%B")
    assert message.startswith("[OPS-7] apply_patch: M src/util.py\n\n")
    keys = [key for key, _ in git_trailers(message)]
    assert keys[0] == "Change-Id" and keys[1] == "Call-Id" and keys[-1] == "Args-Sha256"
    assert repo.call_ids() == [call_id]
    assert run_cli("audit", "--repo", str(repo.path)).returncode == 0


def test_a_hook_that_drops_the_call_block_gets_it_back(repo: Repo) -> None:
    install(repo.path / ".git" / "hooks", "commit-msg", "#!/bin/sh\necho 'reworded' > \"$1\"\n")
    done = apply(repo, UTIL_PATCH, "--json")
    assert done.returncode == 0, done.stderr
    message = repo.git("log", "-1", "--format=%B")
    assert message.startswith("reworded\n\nCall-Id: ")
    assert repo.call_ids() == [orjson.loads(done.stdout)["call_id"]]


def test_a_failing_commit_msg_hook_rejects(repo: Repo) -> None:
    install(repo.path / ".git" / "hooks", "commit-msg", "#!/bin/sh\necho 'no ticket' >&2\nexit 1\n")
    before = user_state(repo)
    done = apply(repo, UTIL_PATCH)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "error: the repository's commit-msg hook refused the commit (exit 1): no ticket;"
    )
    assert user_state(repo) == before


def test_no_verify_skips_pre_commit_and_commit_msg_and_is_recorded(
    repo: Repo, tmp_path: Path
) -> None:
    hooks = repo.path / ".git" / "hooks"
    install(hooks, "pre-commit", "#!/bin/sh\nexit 1\n")
    install(hooks, "commit-msg", "#!/bin/sh\nexit 1\n")
    install(hooks, "prepare-commit-msg", TICKET_PREFIX)
    done = apply(repo, BAD_PATCH, "--json", "--no-verify")
    assert done.returncode == 0, done.stdout
    receipt = orjson.loads(done.stdout)
    assert receipt["no_verify"] is True
    assert [c["name"] for c in receipt["checks"] if c["name"].startswith("hook:")] == [
        "hook:prepare-commit-msg"
    ]
    assert repo.git("log", "-1", "--format=%s").startswith("[OPS-7] ")
    shown = orjson.loads(
        run_cli("show", receipt["call_id"], "--repo", str(repo.path), "--json").stdout
    )
    assert shown["no_verify"] is True
    # revert takes it too.
    undone = run_cli(
        "revert", receipt["call_id"], "--repo", str(repo.path), "--no-verify", "--json"
    )
    assert undone.returncode == 0, undone.stdout
    assert orjson.loads(undone.stdout)["no_verify"] is True


def test_core_hooks_path_relative_to_the_work_tree_and_a_non_executable_hook(
    repo: Repo, tmp_path: Path
) -> None:
    install(repo.path / ".git" / "hooks", "pre-commit", "#!/bin/sh\nexit 1\n")
    install(repo.path / "ci-hooks", "pre-commit", REFUSE_FIXME)
    repo.git("add", "ci-hooks")
    repo.git("commit", "-q", "--no-verify", "-m", "hooks")
    repo.git("config", "core.hooksPath", "ci-hooks")
    # .git/hooks is not used: core.hooksPath replaces it.
    assert apply(repo, UTIL_PATCH).returncode == 0
    assert (
        apply(
            repo,
            BAD_PATCH.replace("VALUE = 1", "VALUE = 2").replace("VALUE = 2  #", "VALUE = 3  #"),
        ).returncode
        == 1
    )
    # git ignores a hook that is not executable, and so does applyonce.
    os.chmod(repo.path / "ci-hooks" / "pre-commit", 0o644)
    repo.git("update-index", "--chmod=-x", "ci-hooks/pre-commit")
    repo.git("commit", "-q", "--no-verify", "-m", "off")
    patch = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 2\n+VALUE = 4 # FIXME\n*** End Patch\n"
    assert apply(repo, patch).returncode == 0


def test_a_linked_worktree_runs_the_main_repository_hooks(repo: Repo, tmp_path: Path) -> None:
    install(repo.path / ".git" / "hooks", "pre-commit", REFUSE_FIXME)
    linked = tmp_path / "linked"
    repo.git("worktree", "add", "-q", "-b", "side", str(linked))
    before = (linked / "src" / "util.py").read_bytes()
    done = run_cli("apply", "-", "--repo", str(linked), input=BAD_PATCH)
    assert done.returncode == 1, done.stderr
    assert "pre-commit hook refused" in done.stderr
    assert (linked / "src" / "util.py").read_bytes() == before
    assert run_cli("apply", "-", "--repo", str(linked), input=UTIL_PATCH).returncode == 0
    assert repo.git("log", "-1", "--format=%s", "side").startswith("apply_patch: M src/util.py")


@pytest.mark.parametrize("hook", ["pre-commit", "commit-msg"])
def test_a_hook_that_hangs_is_killed_at_the_check_timeout(repo: Repo, hook: str) -> None:
    install(repo.path / ".git" / "hooks", hook, "#!/bin/sh\nsleep 30\n")
    done = apply(repo, UTIL_PATCH, "--check-timeout", "1")
    assert done.returncode == 1
    assert done.stderr.startswith(
        f"error: the repository's {hook} hook refused the commit (timed out)"
    )


def test_a_hook_that_writes_with_git_touches_only_the_scratch_checkout(repo: Repo) -> None:
    """A hook's git commands run in the scratch checkout: its commits, refs, config and lock
    files never reach the user's repository."""
    meddle = (
        "#!/bin/sh\nset -e\ngit config user.name Meddler\n"
        "git -c user.email=m@x commit -q --allow-empty -m sneaky\n"
        "git update-ref refs/heads/sneaky HEAD\n: > .git/index.lock\n"
    )
    install(repo.path / ".git" / "hooks", "pre-commit", meddle)
    config = (repo.path / ".git" / "config").read_bytes()
    base = repo.head()
    done = apply(repo, UTIL_PATCH, "--json")
    assert done.returncode == 0, done.stderr
    assert repo.git("rev-parse", "HEAD~1").strip() == base
    assert repo.git("for-each-ref", "--format=%(refname)") == "refs/heads/main\n"
    assert (repo.path / ".git" / "config").read_bytes() == config
    assert not (repo.path / ".git" / "index.lock").exists()
    assert repo.git("status", "--porcelain") == ""
    assert "sneaky" not in repo.git("log", "--format=%s")
    # The lock file it left in the scratch checkout does not stop the next call.
    back = (
        "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 2\n+VALUE = 1\n*** End Patch\n"
    )
    assert apply(repo, back).returncode == 0


def test_a_message_hook_that_empties_the_message_rejects(repo: Repo) -> None:
    install(repo.path / ".git" / "hooks", "commit-msg", '#!/bin/sh\n: > "$1"\n')
    before = user_state(repo)
    done = apply(repo, UTIL_PATCH)
    assert done.returncode == 1
    assert done.stderr == (
        "error: the commit-msg or prepare-commit-msg hook left the commit message empty; fix the"
        " repository's hook, or pass --no-verify\n"
    )
    assert user_state(repo) == before


def test_with_dirty_commit_the_hooks_judge_the_call_on_the_snapshot(
    repo: Repo, tmp_path: Path
) -> None:
    """--dirty commit: the call's parent is the snapshot of the user's changes, so the hooks see
    only the call's change staged, as 'git commit' after committing those changes would."""
    spy = tmp_path / "staged.diff"
    install(
        repo.path / ".git" / "hooks",
        "pre-commit",
        '#!/bin/sh\ngit diff --cached -U0 > "$SPY_LOG"\ngit diff --cached -U0 | grep "^+" | grep -q FIXME && exit 1\n'
        "exit 0\n",
    )
    (repo.path / "src" / "util.py").write_text("VALUE = 1\n# FIXME mine, not committed\n")
    done = apply(repo, UTIL_PATCH, "--dirty", "commit", env={"SPY_LOG": str(spy)})
    assert done.returncode == 0, done.stderr
    staged = spy.read_text()
    assert "+VALUE = 2" in staged and "FIXME" not in staged
    assert repo.git("show", "HEAD:src/util.py") == "VALUE = 2\n# FIXME mine, not committed\n"
