"""The ``apply_patch`` command is exactly once, in real processes (docs/reference/apply-patch.md).

Without a tool-call ID, the patch sent again is a replay while the branch still shows what it did,
and runs again once it does not (reverted, reset, its files changed since); with
``APPLYONCE_TOOL_CALL_ID``, the ID is the call. A crash anywhere is settled by the repeat, never
applied twice. Bad input: one ``error:`` line, the exit code, nothing written.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Repo, run_cli

pytestmark = pytest.mark.sampled(every=2, by="module")

OURS = [sys.executable, "-c", "from applyonce.adapters.apply_patch_cmd import main; main()"]
PATCH = (
    "*** Begin Patch\n*** Update File: src/app.py\n@@ def greet(name):\n"
    "-    return 'hello ' + name\n+    return 'Hello, ' + name\n*** End Patch\n"
)
SUCCESS = "Success. Updated the following files:\nM src/app.py\n"
CHANGED = "def greet(name):\n    return 'Hello, ' + name\n"
ORIGINAL = "def greet(name):\n    return 'hello ' + name\n"


def apply_patch(
    repo: Repo,
    patch: str | None = PATCH,
    *,
    stdin: str | None = None,
    cwd: str = "",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``apply_patch PATCH`` (or the patch on stdin) in ``repo``'s folder ``cwd``."""
    return subprocess.run(
        [*OURS, *([patch] if patch is not None else [])],
        cwd=repo.path / cwd,
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=60,
    )


def app(repo: Repo) -> str:
    return (repo.path / "src/app.py").read_text()


def test_the_same_patch_again_is_a_replay_that_says_so_first(repo: Repo) -> None:
    first = apply_patch(repo)
    assert (first.returncode, first.stdout, first.stderr) == (0, SUCCESS, "")
    head = repo.head()
    second = apply_patch(repo)
    assert second.returncode == 0
    note, _, rest = second.stdout.partition("\n")
    assert note.startswith("Note: this patch was already applied by an earlier call, and the ")
    assert "nothing was applied now" in note
    assert f"its commit {head[:12]} is on refs/heads/main" in note
    assert rest == SUCCESS
    assert repo.head() == head
    assert len(repo.call_ids()) == 1
    assert app(repo) == CHANGED
    assert repo.git("status", "--porcelain") == ""


def test_after_a_revert_the_same_patch_runs_again(repo: Repo) -> None:
    assert apply_patch(repo).returncode == 0
    repo.git("revert", "--no-edit", "HEAD")
    assert app(repo) == ORIGINAL
    again = apply_patch(repo)
    assert (again.returncode, again.stdout) == (0, SUCCESS)  # ran: no note
    assert app(repo) == CHANGED
    ids = repo.call_ids()
    assert len(ids) == 2 and ids[0] != ids[1]  # a new attempt, a call of its own
    assert "Attempt: 2" in repo.git("log", "-1", "--format=%B")
    # And now the branch shows it again: a repeat replays the second attempt.
    third = apply_patch(repo)
    assert third.stdout.startswith("Note: this patch was already applied")
    assert ids[0][:12] in third.stdout
    assert len(repo.call_ids()) == 2


def test_after_a_reset_the_same_patch_runs_again(repo: Repo) -> None:
    base = repo.head()
    assert apply_patch(repo).returncode == 0
    repo.git("reset", "-q", "--hard", base)
    again = apply_patch(repo)
    assert (again.returncode, again.stdout, again.stderr) == (0, SUCCESS, "")
    assert app(repo) == CHANGED
    assert len(repo.call_ids()) == 1  # the first commit is gone from the branch


def test_after_a_later_change_to_its_file_the_same_patch_runs_again(repo: Repo) -> None:
    assert apply_patch(repo).returncode == 0
    (repo.path / "src/app.py").write_text("def greet(name):\n    return 'hello ' + name\n\n# x\n")
    repo.git("commit", "-qam", "by hand")
    again = apply_patch(repo)
    assert (again.returncode, again.stdout) == (0, SUCCESS)
    assert app(repo) == CHANGED + "\n# x\n"


def test_a_later_change_to_another_file_keeps_the_replay(repo: Repo) -> None:
    assert apply_patch(repo).returncode == 0
    (repo.path / "README.md").write_text("# other\n")
    repo.git("commit", "-qam", "by hand")
    head = repo.head()
    again = apply_patch(repo)
    assert again.stdout.startswith("Note: this patch was already applied")
    assert repo.head() == head


def test_the_tool_call_id_is_the_call(repo: Repo) -> None:
    env = {"APPLYONCE_TOOL_CALL_ID": "call_7Yz"}
    first = apply_patch(repo, env=env)
    assert (first.returncode, first.stdout) == (0, SUCCESS)
    message = repo.git("log", "-1", "--format=%B")
    assert "Tool-Call-Id: call_7Yz" in message
    assert "Idempotency-Key: call_7Yz" in message
    head = repo.head()
    # Sent again under the same ID, after a revert: a replay still, and it says the branch no
    # longer shows all of it.
    repo.git("revert", "--no-edit", "HEAD")
    tip = repo.head()
    again = apply_patch(repo, env=env)
    assert again.returncode == 0
    note, _, rest = again.stdout.partition("\n")
    assert note.startswith("Note: this call (tool-call ID call_7Yz) was applied earlier; nothing")
    assert "no longer shows all of its change" in note
    assert head[:12] in note and tip[:12] in note  # the commit, and the one that changed it
    assert rest == SUCCESS
    assert repo.head() == tip and app(repo) == ORIGINAL
    # A new ID: a new call.
    fresh = apply_patch(repo, env={"APPLYONCE_TOOL_CALL_ID": "call_8"})
    assert (fresh.returncode, fresh.stdout) == (0, SUCCESS)
    assert app(repo) == CHANGED


def test_a_tool_call_id_whose_commit_was_reset_away_is_unknown(repo: Repo) -> None:
    env = {"APPLYONCE_TOOL_CALL_ID": "call_9"}
    base = repo.head()
    assert apply_patch(repo, env=env).returncode == 0
    commit = repo.head()
    repo.git("reset", "-q", "--hard", base)
    ran = apply_patch(repo, env=env)
    assert (ran.returncode, ran.stdout) == (5, "")
    assert ran.stderr.startswith(f"error: call {repo_call(repo, commit)[:12]} was committed as ")
    assert ran.stderr.endswith(
        "if the change is still wanted, send it again under a new APPLYONCE_TOOL_CALL_ID\n"
    )
    assert (repo.head(), app(repo)) == (base, ORIGINAL)


def repo_call(repo: Repo, commit: str) -> str:
    return repo.git("log", "-1", "--format=%(trailers:key=Call-Id,valueonly)", commit).strip()


def test_uncommitted_changes_are_refused_in_apply_patch_terms(repo: Repo) -> None:
    (repo.path / "src/app.py").write_text(ORIGINAL + "# mine\n")
    head = repo.head()
    ran = apply_patch(repo)
    assert (ran.returncode, ran.stdout) == (4, "")
    assert ran.stderr == (
        f"error: src/app.py has uncommitted changes in the checkout at {repo.path}; commit or "
        "stash them, or run 'git config applyonce.dirty commit' to commit them first\n"
    )
    assert app(repo) == ORIGINAL + "# mine\n" and repo.head() == head
    # As the line says: then the patch goes on top of them, and they are kept.
    repo.git("config", "applyonce.dirty", "commit")
    done = apply_patch(repo)
    assert (done.returncode, done.stdout) == (0, SUCCESS)
    assert app(repo) == CHANGED + "# mine\n"


@pytest.mark.parametrize("bad", ["two words", "x" * 201, "line\nbreak"])
def test_a_bad_tool_call_id_is_refused(repo: Repo, bad: str) -> None:
    files, head = repo.files(), repo.head()
    ran = apply_patch(repo, env={"APPLYONCE_TOOL_CALL_ID": bad})
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr == (
        "error: the tool call ID must be 1-200 printable ASCII characters without spaces; set "
        "APPLYONCE_TOOL_CALL_ID to the model's tool-call ID, or unset it\n"
    )
    assert (repo.files(), repo.head()) == (files, head)


def test_a_tool_call_id_reused_for_another_patch_is_refused(repo: Repo) -> None:
    env = {"APPLYONCE_TOOL_CALL_ID": "call_1"}
    assert apply_patch(repo, env=env).returncode == 0
    head, files = repo.head(), repo.files()
    other = "*** Begin Patch\n*** Add File: other.txt\n+x\n*** End Patch\n"
    refused = apply_patch(repo, other, env=env)
    assert refused.returncode == 4
    assert refused.stdout == ""
    assert refused.stderr == (
        "error: idempotency key 'call_1' was already used for call "
        f"{repo.call_ids()[0][:12]} with other arguments; set a new APPLYONCE_TOOL_CALL_ID for "
        "a different patch\n"
    )
    assert (repo.head(), repo.files()) == (head, files)


def test_the_patch_on_stdin_and_paths_from_a_subfolder(repo: Repo) -> None:
    patch = (
        "*** Begin Patch\n*** Update File: app.py\n@@\n-    return 'hello ' + name\n"
        "+    return 'Hello, ' + name\n*** Add File: ../docs/new.md\n+new\n*** End Patch\n"
    )
    done = apply_patch(repo, None, stdin=patch, cwd="src")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "Success. Updated the following files:\nA ../docs/new.md\nM app.py\n"
    assert app(repo) == CHANGED
    assert (repo.path / "docs/new.md").read_text() == "new\n"
    # The same call as from the root, spelled from the root: a replay.
    from_root = patch.replace("File: app.py", "File: src/app.py").replace("../docs", "docs")
    again = apply_patch(repo, from_root)
    assert again.stdout.startswith("Note: this patch was already applied")


def test_a_crash_after_the_publish_is_settled_by_the_repeat(repo: Repo) -> None:
    crashed = apply_patch(repo, env={"APPLYONCE_FAULT": "after-publish"})
    assert crashed.returncode == -signal.SIGKILL
    head = repo.head()
    assert len(repo.call_ids()) == 1
    again = apply_patch(repo)
    assert again.returncode == 0, again.stderr
    assert again.stdout.endswith(SUCCESS)
    assert len(repo.call_ids()) == 1  # not applied twice
    assert repo.head() == head
    assert app(repo) == CHANGED
    audit = run_cli("audit", "--repo", str(repo.path))
    assert audit.returncode == 0, audit.stdout + audit.stderr


@pytest.mark.parametrize("fault", ["after-prepared", "after-commit-object", "after-receipt"])
def test_a_crash_anywhere_leaves_one_commit(repo: Repo, fault: str) -> None:
    crashed = apply_patch(repo, env={"APPLYONCE_FAULT": fault})
    assert crashed.returncode == -signal.SIGKILL
    again = apply_patch(repo)
    assert again.returncode == 0, again.stderr
    assert again.stdout.endswith(SUCCESS)
    assert len(repo.call_ids()) == 1
    assert app(repo) == CHANGED
    assert apply_patch(repo).stdout.startswith("Note: this patch was already applied")


def test_outside_a_repository_one_line_and_exit_2(tmp_path: Path) -> None:
    where = tmp_path / "plain"
    where.mkdir()
    ran = subprocess.run(
        [*OURS, PATCH], cwd=where, capture_output=True, text=True, timeout=60, input=""
    )
    assert (ran.returncode, ran.stdout) == (2, "")
    assert ran.stderr == (
        f"error: {os.path.realpath(where)} is not inside a Git repository; run apply_patch "
        "inside a Git work tree\n"
    )
    assert list(where.iterdir()) == []


def test_a_path_out_of_the_work_tree_is_refused(repo: Repo) -> None:
    files, head = repo.files(), repo.head()
    escape = "*** Begin Patch\n*** Add File: ../../outside.txt\n+x\n*** End Patch\n"
    ran = apply_patch(repo, escape, cwd="src")
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr.startswith("error: path '../../outside.txt' contains '..';")
    assert ran.stderr.count("\n") == 1
    assert (repo.files(), repo.head()) == (files, head)
    assert not (repo.path.parent / "outside.txt").exists()


def test_a_malformed_patch_exits_1_with_codex_line_and_applyonce_line(repo: Repo) -> None:
    files, head = repo.files(), repo.head()
    ran = apply_patch(repo, "*** Begin Patch\n*** Frobnicate File: x\n*** End Patch\n")
    assert (ran.returncode, ran.stdout) == (1, "")
    assert ran.stderr == (
        "error: patch line 2: expected '*** Add File: ', '*** Delete File: ' or "
        "'*** Update File: ', found '*** Frobnicate File: x'; fix the patch and send it again\n"
    )
    assert (repo.files(), repo.head()) == (files, head)
    assert not repo.state_dir().joinpath("receipts").exists() or not any(
        repo.state_dir().joinpath("receipts").iterdir()
    )


def test_help(repo: Repo) -> None:
    ran = apply_patch(repo, "--help")
    assert ran.returncode == 0
    assert ran.stdout.startswith("Usage: apply_patch 'PATCH'\n")
    assert "APPLYONCE_TOOL_CALL_ID" in ran.stdout


def test_the_same_patch_at_once_from_four_processes_lands_once(repo: Repo) -> None:
    procs = [
        subprocess.Popen(
            [*OURS, PATCH],
            cwd=repo.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(4)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    results = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]
    assert len(repo.call_ids()) == 1
    assert app(repo) == CHANGED
    for code, out, err in results:
        # Each one applied it, replayed it, or was told the call runs in another process.
        assert code in (0, 4), (code, out, err)
        assert out.endswith(SUCCESS) if code == 0 else err.startswith("error: ")
    assert sum(code == 0 and out == SUCCESS for code, out, _ in results) == 1


def test_the_installed_command(repo: Repo) -> None:
    script = Path(sys.executable).parent / "apply_patch"
    if not script.exists():
        pytest.skip(
            "no apply_patch beside this interpreter (install the package: pip install -e .)"
        )
    ran = subprocess.run(
        [str(script), PATCH], cwd=repo.path, capture_output=True, text=True, timeout=60
    )
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, SUCCESS, "")


def test_in_a_shallow_clone_the_refusal_names_what_apply_patch_users_can_do(
    repo: Repo, tmp_path: Path
) -> None:
    """A shallow clone cannot tell whether the call landed before: refused, exit 4, nothing
    written, and the way out named as git config, not as a flag apply_patch does not take."""
    repo.git("commit", "--allow-empty", "-qm", "second")  # a parent for the shallow tip to lack
    shallow = Repo(tmp_path / "shallow")
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", f"file://{repo.path}", str(shallow.path)],
        check=True,
        capture_output=True,
    )
    head, files = shallow.head(), shallow.files()
    done = apply_patch(shallow)
    assert done.returncode == 4, done.stderr
    assert done.stdout == ""
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "shallow" in line
    assert "--remote" not in done.stderr and "git config applyonce.remote NAME" in line
    assert shallow.head() == head and shallow.files() == files
    assert not shallow.state_dir().exists() or not list(shallow.state_dir().glob("receipts/*"))


def test_a_call_with_its_stdout_closed_commits_and_exits_0_without_an_internal_error(
    repo: Repo,
) -> None:
    """``apply_patch PATCH >&-``: the call commits, its summary goes nowhere, the exit code says
    so (it said "internal error" and exit 1 after committing)."""
    script = Path(sys.executable).parent / "apply_patch"
    done = subprocess.run(
        ["sh", "-c", '"$0" "$1" >&-', str(script), PATCH],
        cwd=repo.path,
        capture_output=True,
        text=True,
        env={**os.environ, "APPLYONCE_SERVE": "0"},
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert app(repo) == CHANGED
    assert len(repo.call_ids()) == 1
