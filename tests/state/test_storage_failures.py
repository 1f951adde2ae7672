"""A full disk or a read-only state directory is named, keeps its exit code, and never costs the
ledger (issue 11, item 10).

Tests run as root, where chmod does not stop a write: the state directory is a real tiny tmpfs or a
read-only bind mount, in a private mount namespace (``unshare -m``) that ends with the test.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import NEW_FILE_PATCH, Repo, apply

UTIL = "*** Begin Patch\n*** Update File: src/util.py\n@@\n-VALUE = 1\n+VALUE = 2\n*** End Patch\n"


def _unshare_ok() -> bool:
    try:
        probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    except FileNotFoundError:
        return False
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(
    not _unshare_ok(), reason="needs 'unshare -m' (a private mount namespace) to mount a tmpfs"
)


def _in_namespace(script: str) -> None:
    result = subprocess.run(
        ["unshare", "-m", "sh", "-ec", script], capture_output=True, check=False
    )
    assert result.returncode == 0, result.stderr.decode()


def _cli(tmp_path: Path, name: str, repo: Repo, state: Path, *args: str, patch: str = UTIL) -> str:
    """A shell line running the real CLI; its exit code, stdout and stderr land in tmp_path."""
    patch_file = tmp_path / f"{name}.patch"
    patch_file.write_text(patch)
    command = [
        sys.executable,
        "-m",
        "applyonce",
        *args,
        "--repo",
        str(repo.path),
        "--state-dir",
        str(state),
    ]
    out = tmp_path / name
    return (
        f"{shlex.join(command)} < {patch_file} > {out}.out 2> {out}.err && echo 0 > {out}.rc"
        f" || echo $? > {out}.rc"
    )


def _result(tmp_path: Path, name: str) -> tuple[int, str]:
    return int((tmp_path / f"{name}.rc").read_text()), (tmp_path / f"{name}.err").read_text()


def _assert_named(err: str, cause: str) -> None:
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert cause in err and "Traceback" not in err
    assert "aside" not in err and "unreadable" not in err  # the ledger is fine: keep it


def test_a_full_disk_is_named_and_the_ledger_kept(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    head = repo.head()
    _in_namespace(
        f"mount -t tmpfs -o size=1m tmpfs {state}\n"
        + _cli(tmp_path, "first", repo, state, "apply", "-", patch=NEW_FILE_PATCH)
        + "\n"
        + f"dd if=/dev/zero of={state}/fill bs=4k count=1000 2>/dev/null || true\n"
        + _cli(tmp_path, "full", repo, state, "apply", "-")
        + "\n"
        + f"rm {state}/fill\n"
        + _cli(tmp_path, "again", repo, state, "apply", "-")
        + "\n"
    )
    assert _result(tmp_path, "first")[0] == 0
    code, err = _result(tmp_path, "full")
    assert code == 2, err
    _assert_named(err, f"cannot write applyonce's state in {state}: the disk is full")
    # With space again, the same ledger carries on: the call runs and lands once.
    code, err = _result(tmp_path, "again")
    assert code == 0, err
    assert repo.commit_count() == 3 and repo.git("rev-parse", "HEAD~2").strip() == head
    assert len(repo.call_ids()) == 2


def test_a_read_only_state_dir_is_named_and_nothing_written(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert apply(repo, NEW_FILE_PATCH, "--state-dir", str(state)).returncode == 0
    head = repo.head()
    ledger = (state / "ledger.sqlite3").read_bytes()
    _in_namespace(
        f"mount --bind {state} {state}\nmount -o remount,bind,ro {state}\n"
        + _cli(tmp_path, "ro", repo, state, "apply", "-")
        + "\n"
    )
    code, err = _result(tmp_path, "ro")
    assert code == 2, err
    _assert_named(err, "the file system is read-only")
    assert repo.head() == head and (state / "ledger.sqlite3").read_bytes() == ledger


def test_a_full_disk_after_the_publish_says_the_patch_landed(repo: Repo, tmp_path: Path) -> None:
    state = tmp_path / "state"
    receipts = state / "receipts"
    receipts.mkdir(parents=True)
    # The check fills the receipts' disk: the publish happens, the committed receipt cannot.
    fill = f"dd if=/dev/zero of={receipts}/fill bs=4k count=1000 2>/dev/null; true"
    _in_namespace(
        f"mount -t tmpfs -o size=256k tmpfs {receipts}\n"
        + _cli(tmp_path, "landed", repo, state, "apply", "-", "--check", fill)
        + "\n"
        + f"rm {receipts}/fill\n"
        + _cli(tmp_path, "recover", repo, state, "recover")
        + "\n"
        + _cli(tmp_path, "repeat", repo, state, "apply", "-", "--check", "true")
        + "\n"
    )
    code, err = _result(tmp_path, "landed")
    assert code == 5, err
    _assert_named(err, "is on refs/heads/main, but its record could not be written")
    assert "the disk is full" in err and "the patch is applied" in err
    assert _result(tmp_path, "recover")[0] == 0
    code, err = _result(tmp_path, "repeat")
    assert code == 0, err
    assert repo.commit_count() == 2 and len(repo.call_ids()) == 1
    assert repo.git("fsck", "--strict").strip() == ""


def test_a_full_disk_under_the_repository_rejects_the_call_as_retryable(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    repo.path.mkdir()
    state = tmp_path / "state"
    commits = tmp_path / "commits"
    # The repository on a tiny disk of its own: the call's blobs cannot be written.
    _in_namespace(
        f"mount -t tmpfs -o size=512k tmpfs {repo.path}\ncd {repo.path}\n"
        "git init -q -b main . && mkdir src && echo 'VALUE = 1' > src/util.py\n"
        "git add -A && git commit -q -m base\n"
        f"dd if=/dev/zero of={repo.path}/.fill bs=4k count=1000 2>/dev/null || true\n"
        + _cli(tmp_path, "full", repo, state, "apply", "-")
        + "\n"
        + f"git rev-list --count HEAD > {commits}.before\nrm {repo.path}/.fill\n"
        + _cli(tmp_path, "again", repo, state, "apply", "-")
        + "\n"
        + f"git rev-list --count HEAD > {commits}.after\n"
    )
    code, err = _result(tmp_path, "full")
    assert code == 1, err
    _assert_named(err, f"cannot write Git objects in {repo.path}/.git/objects: the disk is full")
    assert (tmp_path / "commits.before").read_text().strip() == "1"
    code, err = _result(tmp_path, "again")  # rejected as retryable: it runs again
    assert code == 0, err
    assert (tmp_path / "commits.after").read_text().strip() == "2"
